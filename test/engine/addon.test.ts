import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import Ajv2020 from 'ajv/dist/2020';
import { costModel, costModelFields, EngineCostConfig, engineVersion, loadEngine } from '../../src/engine';

// Requires `npx projen engine` (engine/build/disagg-engine and engine/build-addon/.../disagg_engine.node).
const ROOT = path.resolve(__dirname, '..', '..');
const BINARY = path.join(ROOT, 'engine', 'build', 'disagg-engine');
const EXAMPLE = path.join(ROOT, 'engine', 'examples', 'llama-3.3-70b-p5en.json');
const SCHEMA = path.join(ROOT, 'engine', 'schema', 'engine-config.schema.json');

function readExample(): EngineCostConfig {
  return JSON.parse(fs.readFileSync(EXAMPLE, 'utf8')) as EngineCostConfig;
}

function runCost(args: string[]): unknown {
  return JSON.parse(execFileSync(BINARY, ['cost', ...args], { encoding: 'utf8' }));
}

describe('engine addon loading', () => {
  test('importing the library does not load the addon; using the engine does', () => {
    // GIVEN a fresh Node process that records every native module it opens
    const script = `
      const orig = process.dlopen;
      const opened = [];
      process.dlopen = function (m, f, ...rest) { opened.push(f); return orig.call(this, m, f, ...rest); };
      require('./src/index.ts');
      const afterImport = opened.filter((f) => f.endsWith('disagg_engine.node')).length;
      require('./src/engine/index.ts').loadEngine();
      const afterLoad = opened.filter((f) => f.endsWith('disagg_engine.node')).length;
      console.log(JSON.stringify({ afterImport, afterLoad }));`;
    // WHEN it imports src/index.ts, then calls loadEngine()
    const out = execFileSync(process.execPath, ['-r', 'ts-node/register/transpile-only', '-e', script], {
      cwd: ROOT,
      encoding: 'utf8',
    });
    // THEN the import opened nothing and loadEngine opened the addon
    expect(JSON.parse(out.trim().split('\n').pop()!)).toEqual({ afterImport: 0, afterLoad: 1 });
  });

  test('a missing addon is a clear error that says how to build it', () => {
    // GIVEN an addon path that does not exist, in a fresh module registry
    const saved = process.env.DISAGG_ENGINE_ADDON;
    process.env.DISAGG_ENGINE_ADDON = path.join(ROOT, 'engine', 'no-such-dir', 'disagg_engine.node');
    try {
      jest.isolateModules(() => {
        // eslint-disable-next-line @typescript-eslint/no-require-imports
        const fresh = require('../../src/engine') as typeof import('../../src/engine');
        // WHEN / THEN loading fails with the path and the build command
        expect(() => fresh.loadEngine()).toThrow(/no-such-dir.*npx projen engine/);
      });
    } finally {
      if (saved === undefined) {
        delete process.env.DISAGG_ENGINE_ADDON;
      } else {
        process.env.DISAGG_ENGINE_ADDON = saved;
      }
    }
  });

  test('loadEngine caches the module', () => {
    expect(loadEngine()).toBe(loadEngine());
  });
});

describe('engine addon cost model', () => {
  test('version matches the binary', () => {
    const binaryVersion = execFileSync(BINARY, ['version'], { encoding: 'utf8' }).trim();
    expect(engineVersion()).toMatch(/^\d+\.\d+\.\d+/);
    expect(engineVersion()).toBe(binaryVersion);
  });

  test('the example configuration validates against the schema', () => {
    // GIVEN the engine configuration schema (draft 2020-12)
    const ajv = new Ajv2020({ allErrors: true, strict: true });
    const validate = ajv.compile(JSON.parse(fs.readFileSync(SCHEMA, 'utf8')));
    // WHEN the example is validated THEN it passes
    expect(validate(readExample())).toBe(true);
    expect(validate.errors ?? []).toEqual([]);
    // AND a tensor-parallel config without interconnect bandwidth fails, as the engine refuses it
    const noLink = readExample() as any;
    delete noLink.hardware.interconnectBytesPerSecond;
    expect(validate(noLink)).toBe(false);
  });

  test('returns the same step times as `disagg-engine cost` for the example', async () => {
    // GIVEN the example configuration
    const config = readExample();
    // WHEN the addon and the binary evaluate it
    const fromAddon = await costModel(config);
    const fromBinary = runCost(['--config', EXAMPLE]);
    // THEN the reports are identical, number for number
    expect(fromAddon).toEqual(fromBinary);
    expect(fromAddon.tensorParallel).toBe(4);
    expect(fromAddon.prefill.length).toBeGreaterThan(0);
    // AND decode of one sequence is memory bound: weights per rank / effective HBM bandwidth
    const d = fromAddon.decode[0];
    expect(d.memorySeconds).toBeGreaterThan(d.computeSeconds);
    expect(d.memorySeconds).toBeGreaterThan(config.model.weightBytesPerRank / config.hardware.hbmBytesPerSecond);
  });

  test('probes select the step shapes, identically in the addon and the binary', async () => {
    const fromAddon = await costModel(readExample(), {
      prefillTokens: [1000, 3000],
      decodeBatches: [2],
      contextTokensPerSequence: 777,
      mixedChunkTokens: 256,
      transferTokens: [5],
    });
    const fromBinary = runCost([
      '--config', EXAMPLE, '--prefill-tokens', '1000,3000', '--decode-batches', '2',
      '--context-tokens', '777', '--mixed-chunk-tokens', '256', '--transfer-tokens', '5',
    ]);
    expect(fromAddon).toEqual(fromBinary);
    expect(fromAddon.prefill.map((p) => p.tokens)).toEqual([1000, 3000]);
    expect(fromAddon.kvTransfer[0].bytes).toBe(5 * 327680);
  });

  test('rejects bad input with a message naming the field, the value and the fix', async () => {
    const example = readExample();
    await expect(costModel({ ...example, hardware: { ...example.hardware, peakFlopsPerSecond: 0 } }))
      .rejects.toThrow("'hardware.peakFlopsPerSecond' (0) must be > 0; pass the accelerator's dense peak FLOP/s");
    await expect(costModel({ ...example, parallel: { tensorParallel: 2.5 } }))
      .rejects.toThrow(/'parallel.tensorParallel' \(2.5\) must be a whole number/);
    const { weightBytesPerRank, ...noWeights } = example.model;
    void weightBytesPerRank;
    await expect(costModel({ ...example, model: noWeights as any }))
      .rejects.toThrow(/'model.weightBytesPerRank' is required/);
    await expect(costModel({ ...example, model: { ...example.model, layers: 'eighty' as any } }))
      .rejects.toThrow(/'model.layers' has the wrong type/);
    await expect(costModel(42 as any)).rejects.toThrow(/'config' must be an object/);
    await expect(costModel(example, { prefillTokens: [0] })).rejects.toThrow(/'probes.prefillTokens'/);
    await expect(costModel(example, { decodeBatches: [] })).rejects.toThrow(/'probes.decodeBatches'/);
  });

  test('a throwing getter in the config becomes a rejection, not a crash', async () => {
    const example = readExample();
    const hostile = {
      ...example,
      get hardware(): never {
        throw new Error('getter exploded');
      },
    };
    await expect(costModel(hostile as any)).rejects.toThrow('getter exploded');
  });

  test('the schema states the same fields, defaults and rules as the engine', () => {
    // GIVEN the engine's own field table and the JSON Schema
    const schema = JSON.parse(fs.readFileSync(SCHEMA, 'utf8'));
    const fields = costModelFields();
    expect(fields.length).toBeGreaterThan(10);
    for (const f of fields) {
      const section = schema.properties[f.section];
      const prop = section.properties[f.key];
      // THEN every engine field is in the schema with the same requiredness, default and rule
      expect(prop).toBeDefined();
      expect((section.required ?? []).includes(f.key)).toBe(f.required);
      expect(prop.default).toBe(f.defaultValue);
      switch (f.constraint) {
        case 'positive':
          expect([prop.type, prop.exclusiveMinimum, prop.maximum]).toEqual(['number', 0, undefined]);
          break;
        case 'nonNegative':
          expect([prop.type, prop.minimum]).toEqual(['number', 0]);
          break;
        case 'fraction':
          expect([prop.type, prop.exclusiveMinimum, prop.maximum]).toEqual(['number', 0, 1]);
          break;
        case 'positiveInteger':
          expect([prop.type, prop.minimum]).toEqual(['integer', 1]);
          break;
        case 'wholeNumber':
          expect([prop.type, prop.minimum]).toEqual(['integer', 0]);
          break;
      }
    }
    // AND the cost-model sections of the schema have no number the engine would ignore
    // (pools, router and workload sections belong to the router and simulator, checked by their own tests)
    const costSections = new Set(fields.map((f) => f.section));
    for (const [sectionName, section] of Object.entries<any>(schema.properties)) {
      if (!costSections.has(sectionName)) continue;
      for (const [key, prop] of Object.entries<any>(section.properties)) {
        if (prop.type === 'number' || prop.type === 'integer') {
          expect(fields.some((f) => f.section === sectionName && f.key === key)).toBe(true);
        }
      }
    }
  });
});
