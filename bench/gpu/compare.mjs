#!/usr/bin/env node
// Sets step times measured on a GPU (bench/gpu/step_times.py's JSON) against the engine's cost model
// for the same model on the catalog's numbers for that GPU, and prints a markdown table.
//   node bench/gpu/compare.mjs [--json] STEP_TIMES.json [ACCELERATOR]   (catalog name, default H200)
// --json prints the rows as JSON instead (test/engine/cost-model-gpu.test.ts reads them).
// The model is the catalog's Llama-3.1-8B at BF16, tensor parallel 1, as the constructs resolve it
// (engine-config-builder's costSections, the numbers the router and the simulator get), so what is
// checked is what a user's sizing runs on. The measured JSON must have that model's shape.
// Each row gives the cost model's time at the default efficiencies with no step overhead (the script
// measures no scheduler), and the efficiency the measurement implies: for a prefill the fraction of
// peak FLOP/s reached (ideal compute time / measured), for a decode step the fraction of HBM bandwidth
// (ideal memory time / measured).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const require = createRequire(import.meta.url);
const root = new URL('../..', import.meta.url).pathname;
const { Accelerator, AcceleratedInstanceType, ModelArchitecture } = require(join(root, 'lib/catalog'));
const { Roofline } = require(join(root, 'lib/sizing'));
const { costSections, planFor } = require(join(root, 'lib/engine/engine-config-builder.js'));
const engine = process.env.ENGINE ?? join(root, 'engine/build/disagg-engine');

const args = process.argv.slice(2);
const json = args[0] === '--json';
const [file, acceleratorName = 'H200'] = json ? args.slice(1) : args;
if (!file) {
  console.error('usage: node bench/gpu/compare.mjs [--json] STEP_TIMES.json [ACCELERATOR]');
  process.exit(2);
}
const measured = JSON.parse(readFileSync(file, 'utf8'));
// A step that failed on the GPU (step_times.py records its error instead of seconds) has no row.
for (const step of [...measured.prefill, ...measured.decode].filter(s => typeof s.seconds !== 'number')) {
  console.error(`not compared: ${JSON.stringify(step)}`);
}
measured.prefill = measured.prefill.filter(s => typeof s.seconds === 'number');
measured.decode = measured.decode.filter(s => typeof s.seconds === 'number');
const model = ModelArchitecture.LLAMA_3_1_8B;
const shape = {
  layers: model.layers, hidden: model.hiddenSize, heads: model.attentionHeads, kv_heads: model.kvHeads,
  head_dim: model.headDim, vocab: model.vocabSize,
};
for (const [key, want] of Object.entries(shape)) {
  if (measured.model[key] !== want) {
    throw new Error(`${file}: model.${key} is ${measured.model[key]}, but ${model.name} has ${want}; measure with step_times.py's default shape`);
  }
}
// The rest of the shape (the MLP width) shows in the parameter count, which the cost model reads.
const measuredParameters = measured.weight_bytes / (measured.dtype === 'bfloat16' ? 2 : 4);
if (Math.abs(measuredParameters / model.parametersTotal - 1) > 0.01) {
  throw new Error(`${file}: the measured model has ${measuredParameters} parameters, ${model.name} ${model.parametersTotal}; measure with step_times.py's default shape`);
}
const type = AcceleratedInstanceType.all().find(t => t.accelerator.name === acceleratorName);
if (!type) {
  throw new Error(`no catalog instance type has accelerator '${acceleratorName}'; use one of ${Accelerator.all().map(a => a.name).join(', ')}`);
}
const longest = Math.max(...measured.prefill.map(p => p.tokens), ...measured.decode.map(d => d.context + 1));
const sections = costSections(planFor({ model, maxContext: longest }, type, 1));

const dir = mkdtempSync(join(tmpdir(), 'disagg-gpu-'));
function cost(efficiency, prefill, batches, context) {
  const path = join(dir, 'config.json');
  writeFileSync(path, JSON.stringify({ ...sections, efficiency }));
  const args = ['cost', '--config', path, '--context-tokens', String(context)];
  if (prefill.length) args.push('--prefill-tokens', prefill.join(','));
  if (batches.length) args.push('--decode-batches', batches.join(','));
  return JSON.parse(execFileSync(engine, args, { encoding: 'utf8' }));
}
const defaults = {
  compute: Roofline.DEFAULT_COMPUTE_EFFICIENCY, memory: Roofline.DEFAULT_MEMORY_BANDWIDTH_EFFICIENCY, stepOverheadSeconds: 0,
};
const ideal = { compute: 1, memory: 1, stepOverheadSeconds: 0 };

const rows = [];
const prefillTokens = measured.prefill.map(p => p.tokens);
const [pDefault, pIdeal] = [defaults, ideal].map(e => cost(e, prefillTokens, [], 1).prefill);
measured.prefill.forEach((p, i) => rows.push({
  step: `prefill ${p.tokens} tokens`, seconds: p.seconds, model: pDefault[i].totalSeconds,
  bound: pIdeal[i].computeSeconds >= pIdeal[i].memorySeconds ? 'compute' : 'memory',
  compute: pIdeal[i].computeSeconds / p.seconds, memory: pIdeal[i].memorySeconds / p.seconds,
}));
for (const context of [...new Set(measured.decode.map(d => d.context))]) {
  const steps = measured.decode.filter(d => d.context === context);
  const [dDefault, dIdeal] = [defaults, ideal].map(e => cost(e, [], steps.map(d => d.batch), context).decode);
  steps.forEach((d, i) => rows.push({
    step: `decode ${d.batch} x ${context} context`, seconds: d.seconds, model: dDefault[i].totalSeconds,
    bound: dIdeal[i].computeSeconds >= dIdeal[i].memorySeconds ? 'compute' : 'memory',
    compute: dIdeal[i].computeSeconds / d.seconds, memory: dIdeal[i].memorySeconds / d.seconds,
  }));
}
rmSync(dir, { recursive: true });

if (json) {
  console.log(JSON.stringify(rows, null, 1));
  process.exit(0);
}
const ms = s => (s * 1e3).toFixed(2);
const pct = f => `${(f * 100).toFixed(0)}%`;
const kernels = measured.fused ? 'elementwise kernels fused by torch.compile' : "PyTorch's unfused elementwise kernels";
console.log(`Measured: ${measured.device}, torch ${measured.torch}, ${measured.dtype}, ${kernels}, CUDA graphs, mean of ${measured.reps} replays.`);
console.log(`Model: ${model.name} on ${type.name} (${acceleratorName}: ${sections.hardware.peakFlopsPerSecond / 1e12} TFLOP/s, ` +
  `${sections.hardware.hbmBytesPerSecond / 1e12} TB/s), tensor parallel 1, efficiencies ${defaults.compute} / ${defaults.memory}, no step overhead.`);
console.log('');
console.log('| step | measured (ms) | cost model (ms) | model / measured | bound | peak FLOP/s reached | HBM bandwidth reached |');
console.log('|---|---|---|---|---|---|---|');
for (const r of rows) {
  console.log(`| ${r.step} | ${ms(r.seconds)} | ${ms(r.model)} | ${(r.model / r.seconds).toFixed(2)} | ${r.bound} | ${pct(r.compute)} | ${pct(r.memory)} |`);
}
