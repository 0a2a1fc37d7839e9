import { parseArgs, ParseArgsConfig } from 'util';
import type { CliVocabulary } from './vocabulary';

/**
 * Where a command writes. Each call is one chunk of text; the writer ends it with a newline.
 * Tests pass collectors; the `disagg` binary passes stdout and stderr.
 */
export interface CliIo {
  /** Results: tables, or JSON with `--json`. */
  readonly out: (text: string) => void;
  /** Errors and diagnostics. */
  readonly err: (text: string) => void;
  /**
   * Raw writes to a terminal's stderr (no newline added), for a progress bar redrawn in place.
   * Absent when stderr is not a terminal: long commands then print periodic lines through `err`.
   */
  readonly progress?: (text: string) => void;
}

/**
 * One `disagg` subcommand. A module in `src/cli/commands/` that exports `command` is picked up by
 * `runCli` without further registration.
 */
export interface Command {
  /** The word after `disagg`, e.g. 'plan'. */
  readonly name: string;
  /** One line for `disagg --help`. */
  readonly summary: string;
  /** The full `disagg <name> --help` text. */
  readonly help: string;
  /** The command's flags, as its parser reads them. */
  readonly options: NonNullable<ParseArgsConfig['options']>;
  /**
   * The command's flags for the props that shared rules name in their errors: runCli rewrites each
   * usage error with it, so that the fix it suggests is a flag of this command.
   * @default - errors are printed as raised
   */
  readonly vocabulary?: CliVocabulary;
  /**
   * Runs the command with the arguments after its name.
   * @returns the exit code: 0 success, 1 the answer is negative (e.g. the model does not fit)
   * @throws UsageError for bad arguments (exit code 2)
   */
  run(argv: string[], io: CliIo): Promise<number>;
}

/**
 * Bad arguments: the message says which and how to fix them. `runCli` prints it and exits with 2.
 */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/** Exit codes of every command. */
export const ExitCode = {
  /** The command succeeded (for `plan`: the configuration fits). */
  OK: 0,
  /** The command ran and the answer is negative (for `plan`: it does not fit). */
  NEGATIVE: 1,
  /** Bad arguments: unknown command, option, model or instance type, or a malformed value. */
  USAGE: 2,
  /** An unexpected internal error. */
  INTERNAL: 3,
  /** The checks could not run (for `preflight`: no aws CLI or no working credentials); what to run by hand is printed. */
  UNCHECKED: 4,
} as const;

/** The values `parseOptions` returns for `options`: one typed field per flag. */
export type ParsedOptions<O extends NonNullable<ParseArgsConfig['options']>> =
  ReturnType<typeof parseArgs<{ args: string[]; options: O; strict: true; allowPositionals: false }>>['values'];

/**
 * Flags renamed to read as the constructs' props or to match the other commands, each with the name
 * it became. The old name still works (a command accepts it when it has the new one) and gets a
 * warning; one table, so every command renames the same way.
 */
export const RENAMED_FLAGS: Readonly<Record<string, string>> = {
  'context': 'max-context',
  'kv': 'kv-cache-precision',
  'weights': 'weight-precision',
  'ttft-slo': 'ttft',
  'tpot-slo': 'tpot',
  'workers': 'replicas',
  'prefill': 'prefill-replicas',
  'decode': 'decode-replicas',
};

/**
 * Parses a command's `--flags` strictly (no positionals). A malformed or unknown flag is a
 * UsageError with node's message, which names the flag. A renamed flag (RENAMED_FLAGS) is read as its
 * new name, with a warning on `io.err`. A value that starts with a dash (`--rate -1`) is taken as the
 * value, so that the flag's own check says what is wrong with it rather than node's "argument is
 * ambiguous".
 */
export function parseOptions<O extends NonNullable<ParseArgsConfig['options']>>(argv: string[], options: O, io?: CliIo): ParsedOptions<O> {
  const args: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const m = /^--([^=]+)(=.*)?$/.exec(arg);
    if (!m) {
      args.push(arg);
      continue;
    }
    let name = m[1];
    const renamed = RENAMED_FLAGS[name];
    if (renamed !== undefined && !(name in options) && renamed in options) {
      io?.err(`warning: --${name} is now --${renamed}; the old name still works, the new one reads as the constructs' props do`);
      name = renamed;
    }
    const spec = options[name];
    const next = argv[i + 1];
    if (spec?.type === 'string' && m[2] === undefined && next !== undefined && /^-(\d|\.\d|inf)/i.test(next)) {
      args.push(`--${name}=${next}`);
      i++;
      continue;
    }
    args.push(`--${name}${m[2] ?? ''}`);
  }
  try {
    return parseArgs({ args, options, strict: true as const, allowPositionals: false as const }).values;
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
}
