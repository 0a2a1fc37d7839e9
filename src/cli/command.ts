import { parseArgs, ParseArgsConfig } from 'util';

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
 * Parses a command's `--flags` strictly (no positionals). A malformed or unknown flag is a
 * UsageError with node's message, which names the flag.
 */
export function parseOptions<O extends NonNullable<ParseArgsConfig['options']>>(argv: string[], options: O): ParsedOptions<O> {
  try {
    return parseArgs({ args: argv, options, strict: true as const, allowPositionals: false as const }).values;
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
}
