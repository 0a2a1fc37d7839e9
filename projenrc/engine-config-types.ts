/**
 * Generates src/engine/engine-config.generated.ts, the TypeScript types of the engine's JSON
 * configuration, from engine/schema/engine-config.schema.json (json-schema-to-typescript), so the
 * schema stays the one source of truth for both sides.
 *
 *   npx projen engine:schema-types            rewrite the file
 *   npx projen engine:schema-types --check    exit 1 when the file differs from what the schema gives
 *   ... --file PATH                            write or check PATH instead
 */
import * as fs from 'fs';
import * as path from 'path';
import { compile } from 'json-schema-to-typescript';

const ROOT = path.resolve(__dirname, '..');

/** The schema, relative to the repository root. */
export const ENGINE_CONFIG_SCHEMA = 'engine/schema/engine-config.schema.json';
/** The generated module, relative to the repository root. */
export const ENGINE_CONFIG_TYPES = 'src/engine/engine-config.generated.ts';

const BANNER = `/* eslint-disable */
// ~~ Generated from ${ENGINE_CONFIG_SCHEMA} by projenrc/engine-config-types.ts. Do not edit:
// change the schema and run \`npx projen engine:schema-types\` (test/engine/engine-config-types.test.ts checks it).`;

/** The generated module's text for the schema as it is now. */
export async function renderEngineConfigTypes(): Promise<string> {
  const schema = JSON.parse(fs.readFileSync(path.join(ROOT, ENGINE_CONFIG_SCHEMA), 'utf8'));
  // The schema accepts two kinds of document (its top-level anyOf): a cost-model or simulation
  // file, which has model and hardware, and a router file (typed on its own: RouterConfigFile).
  // These types describe the first kind; an anyOf of required lists would become an intersection
  // with an index signature and make every section optional.
  const costModelFile = schema.anyOf?.find((b: { required?: string[] }) => b.required?.includes('model'));
  const { anyOf: _kinds, ...rest } = schema;
  const typed = costModelFile ? { ...rest, required: costModelFile.required } : schema;
  return compile(typed, 'EngineConfig', {
    bannerComment: BANNER,
    // minItems/maxItems would become tuple types of every allowed length (kvTiers: 1 to 3 entries).
    ignoreMinAndMaxItems: true,
    // Index signatures (policy.options, per-pool overrides) may miss a key: say so in the type.
    strictIndexSignatures: true,
    style: { singleQuote: true, printWidth: 120, bracketSpacing: true, trailingComma: 'all' },
  });
}

async function main(): Promise<void> {
  const at = process.argv.indexOf('--file');
  const file = at >= 0 && process.argv[at + 1] ? path.resolve(process.argv[at + 1]) : path.join(ROOT, ENGINE_CONFIG_TYPES);
  const text = await renderEngineConfigTypes();
  if (process.argv.includes('--check')) {
    const current = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '';
    if (current !== text) {
      process.stderr.write(`${path.relative(ROOT, file)} is out of date with ${ENGINE_CONFIG_SCHEMA}; run \`npx projen engine:schema-types\`\n`);
      process.exit(1);
    }
    return;
  }
  fs.writeFileSync(file, text);
}

if (require.main === module) {
  main().catch((e: Error) => {
    process.stderr.write(`${e.stack ?? e.message}\n`);
    process.exit(1);
  });
}
