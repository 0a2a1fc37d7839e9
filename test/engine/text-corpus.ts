// Seeded generators of hostile text for the tokenizer's differential test: scripts from Latin to CJK
// and Devanagari, emoji and ZWJ sequences, whitespace and newline runs, digits, code, special-token
// look-alikes, combining marks for NFC, lone surrogates and invalid UTF-8 bytes.

import { rng } from '../../src/cli/local/workload';

export { rng };

type Rand = () => number;
const pick = <T>(r: Rand, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)];
const int = (r: Rand, lo: number, hi: number): number => lo + Math.floor(r() * (hi - lo + 1));
const fromRange = (r: Rand, lo: number, hi: number, n: number): string => {
  let s = '';
  for (let i = 0; i < n; i++) s += String.fromCodePoint(int(r, lo, hi));
  return s;
};

const WORDS = ['the', 'The', 'quick', 'brown', 'fox', "don't", "It's", "I'LL", "we'Re", "THEY'VE", "she'd", "'s", "'S",
  'hello', 'world', 'tokenizer', 'naïve', 'café', 'Zürich', 'façade', 'résumé', 'ſtraße', "'ſ", "'K", 'İstanbul', 'ǅemal',
  'GPU', 'H100', 'p5en.48xlarge', 'KV-cache', 'prefill/decode', 'e.g.', 'U.S.A.', 'x86_64', 'snake_case', 'camelCase',
  'well-known', '—', '–', '…', '«quoted»', '“curly”', '‘single’', '(paren)', '[bracket]', '{brace}', '$100', '€5', '¥', '™'];
const SCRIPTS: Array<[number, number]> = [
  [0x4e00, 0x9fff], // CJK unified ideographs
  [0x3040, 0x309f], // Hiragana
  [0x30a0, 0x30ff], // Katakana
  [0xac00, 0xd7a3], // Hangul syllables
  [0x0900, 0x097f], // Devanagari (with combining vowel signs)
  [0x0980, 0x09ff], // Bengali
  [0x0600, 0x06ff], // Arabic
  [0x0400, 0x04ff], // Cyrillic
  [0x0370, 0x03ff], // Greek
  [0x0e00, 0x0e7f], // Thai
  [0x05d0, 0x05ea], // Hebrew
  [0x1100, 0x11ff], // Hangul jamo (NFC composes L+V+T)
  [0x0300, 0x036f], // combining diacritics
  [0xff00, 0xffef], // fullwidth forms
  [0x2000, 0x206f], // general punctuation (spaces, ZWJ, marks)
  [0x20000, 0x2a6df], // CJK extension B (4-byte UTF-8)
];
const EMOJI = ['😀', '👍🏽', '👨‍👩‍👧‍👦', '🏳️‍🌈', '🇯🇵', '🇺🇸', '❤️', '✈︎', '🧑🏿‍🚀', '👩‍💻', '🤖', '🔥', '1️⃣', '#️⃣', '©️'];
const SPACES = [' ', '  ', '    ', '\t', '\n', '\n\n', '\r\n', '\r', ' \n ', '\u00a0', '\u3000', '\u2028', '\u2029', '\u0085',
  '\u200b', '\u202f', '\u205f', '\u1680', '\u000b', '\u000c', '\u180e', '\ufeff'];
const DIGITS = ['0', '7', '42', '123', '1234', '12345678901', '3.14159', '1,000,000', '٠١٢٣٤', '०१२३', '０１２３', '²³', '½', 'Ⅻ'];
const CODE = [
  'def f(x):\n    return x ** 2\n',
  'for (let i = 0; i < n; i++) {\n\tsum += a[i];\n}',
  '{"model": "llama", "messages": [{"role": "user", "content": "hi"}]}',
  '#include <vector>\nint main() { return 0; }',
  'SELECT * FROM t WHERE id = 1;',
  '    if x:\n        pass\n    else:\n        raise ValueError("bad")\n',
  '```python\nprint("hi")\n```',
  '<div class="a">&nbsp;</div>',
  'a+=b;c-=d;e*=f;g/=h;i%=j',
  '$ kubectl get pods -n default --watch',
];
// Combining marks out of canonical order, from Unicode versions on both sides of the reference's
// tables (9.0): U+08D4 (9.0) reorders, U+1DF6 (10.0) and U+09FE (11.0) do not.
const NFC_CASES = ['\u08d4\u0f71', '\u1df6\u0f71', '\u09fe\u09cd', '\u0f71\u0d3b', 'e\u0301', 'A\u030a', '\u212b', '\u1100\u1161\u11a8', 'n\u0303', 'ﬁ', '\u0958', 'Å', 'a\u0323\u0302', '\u00c5\u0301',
  '\u0345', 'ö\u0308', '\u1e9b\u0323', '\u0f73', '\u2126'];

/** Strings mixing every category, plus look-alikes of `specials` (a tokenizer's added tokens). */
export function textCorpus(seed: number, count: number, specials: string[]): string[] {
  const r = rng(seed);
  const lookAlike = (): string => {
    const t = pick(r, specials.length ? specials : ['<s>']);
    switch (int(r, 0, 5)) {
      case 0: return t; // the real token
      case 1: return t.slice(0, Math.max(1, t.length - 1)); // truncated
      case 2: return t.slice(0, 2) + ' ' + t.slice(2); // a space inside
      case 3: return t + t; // adjacent
      case 4: return t.toUpperCase();
      default: return ' ' + t + ' ';
    }
  };
  const part = (): string => {
    switch (int(r, 0, 11)) {
      case 0: case 1: return Array.from({ length: int(r, 1, 8) }, () => pick(r, WORDS)).join(pick(r, [' ', ' ', ', ', '. ', '\n']));
      case 2: { const [lo, hi] = pick(r, SCRIPTS); return fromRange(r, lo, hi, int(r, 1, 12)); }
      case 3: return Array.from({ length: int(r, 1, 4) }, () => pick(r, EMOJI)).join(pick(r, ['', ' ', '\u200d']));
      case 4: return Array.from({ length: int(r, 1, 4) }, () => pick(r, SPACES)).join('');
      case 5: return pick(r, DIGITS) + pick(r, ['', ' ', 'px', '%', '.']) + pick(r, DIGITS);
      case 6: return pick(r, CODE);
      case 7: return lookAlike();
      case 8: return pick(r, NFC_CASES) + pick(r, ['', ' ', 'x']);
      case 9: return String.fromCharCode(int(r, 0xd800, 0xdfff)); // a lone surrogate
      case 10: { // any code point of planes 0-2, assigned or not (surrogates excepted)
        const cp = r() < 0.7 ? int(r, 0x20, 0xffff) : int(r, 0x10000, 0x2ffff);
        return cp >= 0xd800 && cp <= 0xdfff ? 'x' : String.fromCodePoint(cp);
      }
      default: return String.fromCodePoint(int(r, 0, 0x1f)); // control characters
    }
  };
  const out: string[] = [];
  for (let i = 0; i < count; i++) {
    const parts = i % 50 === 49 ? int(r, 200, 600) : int(r, 1, 12); // a few long strings
    let s = '';
    for (let p = 0; p < parts; p++) s += part() + (r() < 0.3 ? pick(r, SPACES) : '');
    out.push(s);
  }
  return out;
}

/** Random byte strings, invalid UTF-8 included (truncated sequences, overlongs, surrogates, 0xFF). */
export function byteCorpus(seed: number, count: number): Buffer[] {
  const r = rng(seed);
  const pieces = [[0xc3], [0xe2, 0x82], [0xf0, 0x9f, 0x98], [0xed, 0xa0, 0x80], [0xc0, 0xaf], [0xff], [0xfe], [0x80], [0xbf],
    [0xf4, 0x90, 0x80, 0x80], [0xe0, 0x80, 0x80], [0xf8, 0x88, 0x80, 0x80, 0x80]];
  const out: Buffer[] = [];
  for (let i = 0; i < count; i++) {
    const bytes: number[] = [];
    const n = int(r, 1, 16);
    for (let k = 0; k < n; k++) {
      if (r() < 0.4) bytes.push(...pick(r, pieces));
      else bytes.push(...Buffer.from(pick(r, WORDS) + pick(r, [' ', '', '\n'])));
    }
    out.push(Buffer.from(bytes));
  }
  return out;
}
