import * as fs from 'fs';
import * as path from 'path';
import { CliIo, ExitCode, UsageError } from './command';
import { loadCommands } from './registry';

/** This package's version, from its package.json (src/cli or lib/cli is two levels below it). */
export function packageVersion(): string {
  return (JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', 'package.json'), 'utf8')) as { version: string }).version;
}

/**
 * The `disagg` command line, callable in-process: parses `argv` (the arguments after the program
 * name), runs the subcommand and returns its exit code. Never throws.
 *
 * Exit codes: 0 success, 1 negative answer (plan: does not fit), 2 usage error, 3 internal error, 4 checks that could not run (preflight).
 */
export async function runCli(argv: string[], io: CliIo): Promise<number> {
  const commands = loadCommands();
  const usage = [
    'Usage: disagg <command> [options]',
    '',
    'Commands:',
    ...commands.map(c => `  ${c.name.padEnd(10)}${c.summary}`),
    '',
    "Run 'disagg <command> --help' or 'disagg help <command>' for a command's options; 'disagg --version' for the version.",
    'Exit codes: 0 success, 1 negative answer (plan: does not fit), 2 usage error, 3 internal error, 4 checks that could not run (preflight).',
  ].join('\n');

  const [name, ...rest] = argv;
  if (name === undefined) {
    io.err(usage);
    return ExitCode.USAGE;
  }
  if (name === '--version' || name === '-V' || name === 'version') {
    io.out(packageVersion());
    return ExitCode.OK;
  }
  if (name === 'help' && rest.length > 0) {
    const asked = commands.find(c => c.name === rest[0]);
    if (!asked) {
      io.err(`disagg help: unknown command '${rest[0]}'; known: ${commands.map(c => c.name).join(', ')}`);
      return ExitCode.USAGE;
    }
    io.out(asked.help);
    return ExitCode.OK;
  }
  if (name === '--help' || name === '-h' || name === 'help') {
    io.out(usage);
    return ExitCode.OK;
  }
  const command = commands.find(c => c.name === name);
  if (!command) {
    io.err(`disagg: unknown command '${name}'; known: ${commands.map(c => c.name).join(', ')}\n\n${usage}`);
    return ExitCode.USAGE;
  }
  // Every command's help, here rather than in each command's flag parser (one missed it).
  if (rest.includes('--help') || rest.includes('-h')) {
    io.out(command.help);
    return ExitCode.OK;
  }
  try {
    return await command.run(rest, io);
  } catch (e) {
    if (e instanceof UsageError) {
      const message = command.vocabulary?.speak(e.message) ?? e.message;
      io.err(`disagg ${command.name}: ${message}\nRun 'disagg ${command.name} --help' for the options.`);
      return ExitCode.USAGE;
    }
    io.err(`disagg ${command.name}: internal error: ${(e as Error).stack ?? String(e)}`);
    return ExitCode.INTERNAL;
  }
}
