// `disagg-engine simulate --config FILE` through the Node addon instead of the binary, for
// bench/published.sh without a built engine/build (SIMULATE="npx ts-node --transpile-only
// bench/published/simulate-addon.ts"; the addon is DISAGG_ENGINE_ADDON or engine/build-addon).
// Prints the same summary JSON on stdout.
import * as fs from 'fs';
import { simulate } from '../../src/engine';

async function main(): Promise<void> {
  const i = process.argv.indexOf('--config');
  if (i < 0 || !process.argv[i + 1]) throw new Error('usage: simulate-addon.ts --config FILE');
  const config = JSON.parse(fs.readFileSync(process.argv[i + 1], 'utf8'));
  process.stdout.write(JSON.stringify(await simulate(config)) + '\n');
}

main().catch(e => {
  process.stderr.write(`${(e as Error).message}\n`);
  process.exit(1);
});
