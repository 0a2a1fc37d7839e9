import { CliIo, ExitCode, UsageError } from './command';
import { loadCommands } from './registry';

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
    "Run 'disagg <command> --help' for a command's options.",
    'Exit codes: 0 success, 1 negative answer (plan: does not fit), 2 usage error, 3 internal error, 4 checks that could not run (preflight).',
  ].join('\n');

  const [name, ...rest] = argv;
  if (name === undefined) {
    io.err(usage);
    return ExitCode.USAGE;
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
      io.err(`disagg ${command.name}: ${e.message}\nRun 'disagg ${command.name} --help' for the options.`);
      return ExitCode.USAGE;
    }
    io.err(`disagg ${command.name}: internal error: ${(e as Error).stack ?? String(e)}`);
    return ExitCode.INTERNAL;
  }
}
