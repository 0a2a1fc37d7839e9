import { runCli } from '../../src/cli/run-cli';

/** Runs the `disagg` CLI in-process and collects its exit code and what it writes. */
export async function disagg(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(argv, { out: t => out.push(t), err: t => err.push(t) });
  return { code, out: out.join('\n'), err: err.join('\n') };
}
