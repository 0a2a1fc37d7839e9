import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';

const ROOT = path.join(__dirname, '..', '..');
/** The engine binary under test; DISAGG_ENGINE_BIN points at one built elsewhere. */
export const BINARY = process.env.DISAGG_ENGINE_BIN ?? path.join(ROOT, 'engine', 'build', 'disagg-engine');
/** The example engine configuration the servers run with. */
export const CONFIG = path.join(ROOT, 'engine', 'examples', 'llama-3.3-70b-p5en.json');

/**
 * `describe` when BINARY has every one of `roles` (a role whose libraries were missing at build time
 * is left out of the binary), else `describe.skip` with a warning that names `what`.
 */
export function describeIfRoles(what: string, ...roles: string[]): jest.Describe {
  const built = fs.existsSync(BINARY) && roles.every(r => spawnSync(BINARY, [r, '--help']).status === 0);
  if (!built) {
    // eslint-disable-next-line no-console
    console.warn(`${what} skipped: ${BINARY} lacks the ${roles.join(' or ')} role (build engine/ first)`);
  }
  return built ? describe : describe.skip;
}

/** Runs curl (a real raw-HTTP client) and returns [status, body]. */
export function curl(args: string[]): [number, string] {
  const r = spawnSync('curl', ['-s', '-o', '-', '-w', '\n%{http_code}', ...args], { encoding: 'utf8' });
  const lines = r.stdout.split('\n');
  const status = Number(lines.pop());
  return [status, lines.join('\n')];
}
