/**
 * A small Dockerfile reader for static checks: enough of the syntax for the files under images/
 * (line continuations, comments, parser directives, ARG defaults, FROM ... AS, COPY --from,
 * LABEL pairs, USER, ENTRYPOINT/CMD in JSON or shell form). No heredocs, no ONBUILD.
 */

/** One instruction, continuation lines joined. */
export interface Instruction {
  /** Upper-case keyword, e.g. `COPY`. */
  readonly keyword: string;
  /** Everything after the keyword, trimmed. */
  readonly args: string;
  /** 1-based line where the instruction starts. */
  readonly line: number;
}

/** A COPY or ADD instruction. */
export interface CopyInstruction {
  readonly keyword: 'COPY' | 'ADD';
  /** `--from` value, when copying from a stage or an image. */
  readonly from?: string;
  readonly sources: string[];
  readonly destination: string;
  readonly line: number;
}

/** An exec-form (JSON) or shell-form ENTRYPOINT / CMD. */
export interface Command {
  readonly json: boolean;
  /** The JSON array; for shell form, the command line as one element. */
  readonly argv: string[];
  readonly line: number;
}

/** One build stage: from one FROM to the next. */
export interface Stage {
  readonly index: number;
  /** `AS` name, lower-cased, if any. */
  readonly name?: string;
  /** The image reference as written, e.g. `runtime-${TARGETARCH}`. */
  readonly base: string;
  /** `--platform` flag of the FROM, if any. */
  readonly platform?: string;
  readonly line: number;
  readonly instructions: Instruction[];
  readonly copies: CopyInstruction[];
  /** LABELs set in this stage (not inherited). */
  readonly labels: Record<string, string>;
  /** Last USER of this stage, if any. */
  readonly user?: string;
  readonly entrypoint?: Command;
  readonly cmd?: Command;
  /** Default values of the stage's ARGs (undefined when declared without one). */
  readonly args: Record<string, string | undefined>;
}

/** A parsed Dockerfile. */
export interface Dockerfile {
  /** Parser directives (`# syntax=...`), lower-case keys. */
  readonly directives: Record<string, string>;
  /** ARGs declared before the first FROM, with their defaults. */
  readonly globalArgs: Record<string, string | undefined>;
  readonly stages: Stage[];
}

/** Parses Dockerfile text. Throws on syntax this reader does not know, naming the line. */
export function parseDockerfile(text: string): Dockerfile {
  const { directives, instructions } = splitInstructions(text);
  const globalArgs: Record<string, string | undefined> = {};
  const stages: Stage[] = [];
  let current: {
    stage: Omit<Stage, 'user' | 'entrypoint' | 'cmd'>;
    user?: string;
    entrypoint?: Command;
    cmd?: Command;
  } | undefined;

  const finish = () => {
    if (current) stages.push({ ...current.stage, user: current.user, entrypoint: current.entrypoint, cmd: current.cmd });
  };

  for (const ins of instructions) {
    if (ins.keyword === 'FROM') {
      finish();
      const from = parseFrom(ins);
      current = {
        stage: {
          index: stages.length,
          ...from,
          line: ins.line,
          instructions: [],
          copies: [],
          labels: {},
          args: {},
        },
      };
      continue;
    }
    if (!current) {
      if (ins.keyword !== 'ARG') throw new Error(`line ${ins.line}: ${ins.keyword} before the first FROM`);
      Object.assign(globalArgs, parseArg(ins));
      continue;
    }
    current.stage.instructions.push(ins);
    switch (ins.keyword) {
      case 'ARG': Object.assign(current.stage.args, parseArg(ins)); break;
      case 'COPY': case 'ADD': current.stage.copies.push(parseCopy(ins)); break;
      case 'LABEL': Object.assign(current.stage.labels, parsePairs(ins)); break;
      case 'USER': current.user = ins.args; break;
      case 'ENTRYPOINT': current.entrypoint = parseCommand(ins); break;
      case 'CMD': current.cmd = parseCommand(ins); break;
      default: break;
    }
  }
  finish();
  return { directives, globalArgs, stages };
}

function splitInstructions(text: string): { directives: Record<string, string>; instructions: Instruction[] } {
  const directives: Record<string, string> = {};
  const instructions: Instruction[] = [];
  const lines = text.split(/\r?\n/);
  let inHeader = true;
  let buffer = '';
  let start = 0;
  for (let i = 0; i < lines.length; i++) {
    const raw = lines[i];
    const trimmed = raw.trim();
    if (inHeader) {
      const m = /^#\s*([a-zA-Z]+)\s*=\s*(\S+)\s*$/.exec(trimmed);
      if (m && ['syntax', 'escape', 'check'].includes(m[1].toLowerCase())) {
        directives[m[1].toLowerCase()] = m[2];
        continue;
      }
      inHeader = false;
    }
    // Comment lines are dropped, also in the middle of a continued instruction (as Docker does).
    if (trimmed.startsWith('#')) continue;
    // Empty lines are skipped, also inside a continued instruction (as Docker does).
    if (trimmed === '') continue;
    if (buffer === '') start = i + 1;
    if (/\\\s*$/.test(raw)) {
      buffer += raw.replace(/\\\s*$/, ' ');
      continue;
    }
    instructions.push(toInstruction(buffer + raw, start));
    buffer = '';
  }
  // Docker ends a continued instruction at the end of the file.
  if (buffer.trim() !== '') instructions.push(toInstruction(buffer, start));
  return { directives, instructions };
}

function toInstruction(text: string, line: number): Instruction {
  const m = /^\s*([A-Za-z]+)\s*(.*)$/s.exec(text);
  if (!m) throw new Error(`line ${line}: not an instruction: ${text.trim()}`);
  return { keyword: m[1].toUpperCase(), args: m[2].replace(/\s+/g, ' ').trim(), line };
}

function parseFrom(ins: Instruction): { base: string; name?: string; platform?: string } {
  const words = ins.args.split(' ');
  let platform: string | undefined;
  while (words[0]?.startsWith('--')) {
    const flag = words.shift()!;
    const m = /^--platform=(.+)$/.exec(flag);
    if (!m) throw new Error(`line ${ins.line}: unknown FROM flag ${flag}`);
    platform = m[1];
  }
  if (words.length === 1) return { base: words[0], platform };
  if (words.length === 3 && words[1].toUpperCase() === 'AS') return { base: words[0], name: words[2].toLowerCase(), platform };
  throw new Error(`line ${ins.line}: expected 'FROM [--platform=...] <image> [AS <name>]', got 'FROM ${ins.args}'`);
}

function parseArg(ins: Instruction): Record<string, string | undefined> {
  const m = /^([A-Za-z_][A-Za-z0-9_]*)(?:=(.*))?$/.exec(ins.args);
  if (!m) throw new Error(`line ${ins.line}: expected 'ARG <name>[=<default>]', got 'ARG ${ins.args}'`);
  return { [m[1]]: m[2] === undefined ? undefined : unquote(m[2]) };
}

function parseCopy(ins: Instruction): CopyInstruction {
  const keyword = ins.keyword as 'COPY' | 'ADD';
  let rest = ins.args;
  let from: string | undefined;
  for (;;) {
    const m = /^--([a-z-]+)(?:=(\S+))?\s+/.exec(rest);
    if (!m) break;
    if (m[1] === 'from') from = m[2];
    rest = rest.slice(m[0].length);
  }
  const paths = rest.startsWith('[') ? parseJsonArray(rest, ins) : rest.split(' ');
  if (paths.length < 2) throw new Error(`line ${ins.line}: ${keyword} needs a source and a destination`);
  return { keyword, from, sources: paths.slice(0, -1), destination: paths[paths.length - 1], line: ins.line };
}

function parseCommand(ins: Instruction): Command {
  if (ins.args.startsWith('[')) return { json: true, argv: parseJsonArray(ins.args, ins), line: ins.line };
  return { json: false, argv: [ins.args], line: ins.line };
}

function parseJsonArray(text: string, ins: Instruction): string[] {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new Error(`line ${ins.line}: ${ins.keyword} looks like JSON but does not parse: ${text}`);
  }
  if (!Array.isArray(value) || !value.every((v) => typeof v === 'string')) {
    throw new Error(`line ${ins.line}: ${ins.keyword} must be a JSON array of strings`);
  }
  return value as string[];
}

/** `key=value` pairs; values may be double-quoted and contain spaces. */
function parsePairs(ins: Instruction): Record<string, string> {
  const pairs: Record<string, string> = {};
  const re = /([^\s=]+)=("(?:[^"\\]|\\.)*"|\S+)\s*/gy;
  let rest = ins.args;
  let m: RegExpExecArray | null;
  let consumed = 0;
  while ((m = re.exec(rest)) !== null) {
    pairs[m[1]] = unquote(m[2]);
    consumed = re.lastIndex;
  }
  rest = rest.slice(consumed).trim();
  if (rest !== '') throw new Error(`line ${ins.line}: cannot read ${ins.keyword} pairs near '${rest}'`);
  return pairs;
}

function unquote(value: string): string {
  if (value.length >= 2 && value.startsWith('"') && value.endsWith('"')) {
    return value.slice(1, -1).replace(/\\(.)/g, '$1');
  }
  return value;
}

/**
 * Expands `$NAME`, `${NAME}`, `${NAME:-default}` and `${NAME:+word}` from `values`.
 * Unknown names expand to ''.
 */
export function expandArgs(text: string, values: Record<string, string | undefined>): string {
  return text.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)(?::([-+])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)/g,
    (_all, braced: string | undefined, op: string | undefined, word: string | undefined, bare: string | undefined) => {
      const name = braced ?? bare!;
      const value = values[name];
      if (op === '-') return value ? value : (word ?? '');
      if (op === '+') return value ? (word ?? '') : '';
      return value ?? '';
    });
}

/** The stages a stage builds on inside the file, nearest first (itself included). */
export function ancestry(file: Dockerfile, stage: Stage, values: Record<string, string | undefined>): Stage[] {
  const chain: Stage[] = [];
  let current: Stage | undefined = stage;
  while (current && !chain.includes(current)) {
    chain.push(current);
    const base = expandArgs(current.base, values).toLowerCase();
    current = file.stages.find((s) => s.name === base && s.index < current!.index);
  }
  return chain;
}

/** Labels a stage ends up with: its own over those inherited from stages in the same file. */
export function effectiveLabels(file: Dockerfile, stage: Stage, values: Record<string, string | undefined>): Record<string, string> {
  return Object.assign({}, ...ancestry(file, stage, values).reverse().map((s) => s.labels));
}

/** The USER a stage runs as, following its in-file ancestry; undefined when none sets one. */
export function effectiveUser(file: Dockerfile, stage: Stage, values: Record<string, string | undefined>): string | undefined {
  return ancestry(file, stage, values).find((s) => s.user !== undefined)?.user;
}

/** The ENTRYPOINT a stage ends up with, following its in-file ancestry. */
export function effectiveEntrypoint(file: Dockerfile, stage: Stage, values: Record<string, string | undefined>): Command | undefined {
  return ancestry(file, stage, values).find((s) => s.entrypoint !== undefined)?.entrypoint;
}
