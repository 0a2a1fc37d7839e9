import { spawnSync } from 'child_process';

/** Runs curl (a real raw-HTTP client) and returns [status, body]. */
export function curl(args: string[]): [number, string] {
  const r = spawnSync('curl', ['-s', '-o', '-', '-w', '\n%{http_code}', ...args], { encoding: 'utf8' });
  const lines = r.stdout.split('\n');
  const status = Number(lines.pop());
  return [status, lines.join('\n')];
}
