/**
 * The workload `disagg local` sends: tenants whose requests share a long system prompt, and
 * multi-turn chat sessions whose every turn repeats the conversation so far. Both reward routing
 * a request to the worker that already holds its prefix in KV cache. Deterministic for a seed, so
 * the policy under test and the baseline see the same requests.
 */

/** Shape of the workload. */
export interface WorkloadSpec {
  /** 'mixed' (half each), 'shared-prefix' or 'chat'. */
  readonly kind: 'mixed' | 'shared-prefix' | 'chat';
  /** Requests in all (chat turns count one each). */
  readonly requests: number;
  /** Tenants, each with its own system prompt. */
  readonly tenants: number;
  /** Tokens of each tenant's system prompt. */
  readonly systemTokens: number;
  /** Tokens of a shared-prefix request's own question. */
  readonly questionTokens: number;
  /** Turns of a chat session. */
  readonly turns: number;
  /** Tokens of one chat user message. */
  readonly turnTokens: number;
  /** Output tokens per request (max_tokens). */
  readonly maxTokens: number;
  readonly seed: number;
  /**
   * Real text (prose, code) to cut the prompts from, about TEXT_CHARS_PER_TOKEN characters a token,
   * so that a real tokenizer's merges apply as they would to users' prompts.
   * @default - made-up words of 2 to 4 letters, one token each in the sim-worker's made-up tokenizer
   */
  readonly text?: string;
}

/**
 * Characters of real text per requested token: what Llama 3.1's and Qwen3's tokenizers average on
 * this repository's READMEs (markdown prose, tables and code: 3.4-3.8). Approximate: the real
 * tokenizer decides the prompt's length.
 */
export const TEXT_CHARS_PER_TOKEN = 3.6;

/**
 * The API requests go through: `chat` sends the messages to /v1/chat/completions (the sim-worker
 * renders its chat template around them, adding role-header tokens); `completions` sends
 * completionPrompt(messages) to /v1/completions, whose tokens are exactly the text's.
 */
export type RequestApi = 'chat' | 'completions';

/**
 * The /v1/completions prompt of a conversation: the messages' contents joined by single spaces, as
 * inference-perf joins its system prompt, question and earlier turns (no template; a space makes no
 * token in the sim-worker's tokenizer).
 */
export function completionPrompt(messages: readonly Message[]): string {
  return messages.map(m => m.content).join(' ');
}

/** One chat message. */
export interface Message {
  readonly role: 'system' | 'user' | 'assistant';
  readonly content: string;
}

/**
 * A unit of work for one client: an independent request (one turn) or a chat session (its turns in
 * order, each sent after the previous answer arrived, with that answer appended).
 */
export interface Job {
  readonly kind: 'shared-prefix' | 'chat';
  /** Messages before the first turn (the tenant's system prompt). */
  readonly preamble: Message[];
  /** User messages, one per turn. */
  readonly turns: string[];
}

/** mulberry32: a small seeded PRNG (uniform in [0, 1)). */
/* eslint-disable no-bitwise */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
/* eslint-enable no-bitwise */

const LETTERS = 'abcdefghijklmnopqrstuvwxyz';

/**
 * `tokens` words of 2 to 4 letters. The sim-worker's tokenizer makes one token of each such word
 * (engine/src/servers/sim_worker/fake_tokenizer.h), so the count is exact.
 */
function words(next: () => number, tokens: number): string {
  const out: string[] = [];
  for (let i = 0; i < tokens; i++) {
    const len = 2 + Math.floor(next() * 3);
    let w = '';
    for (let j = 0; j < len; j++) w += LETTERS[Math.floor(next() * LETTERS.length)];
    out.push(w);
  }
  return out.join(' ');
}

/**
 * A passage of `text` of about `tokens` tokens (TEXT_CHARS_PER_TOKEN characters a token): from a
 * random word's start, wrapping around to the text's start (after a blank line) when it runs out,
 * cut back to the last whole word. Whitespace inside is kept as written (newlines, indentation).
 */
function passage(next: () => number, text: string, tokens: number): string {
  const want = Math.round(tokens * TEXT_CHARS_PER_TOKEN);
  let at = Math.floor(next() * text.length);
  while (at > 0 && !/\s/.test(text[at - 1])) at--;
  let out = text.slice(at, at + want);
  while (out.length < want) out += `\n\n${text.slice(0, Math.max(0, want - out.length - 2))}`;
  const cut = out.search(/\s\S*$/);
  return (cut > 0 ? out.slice(0, cut) : out).trim();
}

/** The jobs of a workload, `spec.requests` turns in all. */
export function buildJobs(spec: WorkloadSpec): Job[] {
  const next = rng(spec.seed);
  const fill = spec.text === undefined ? (tokens: number) => words(next, tokens) : (tokens: number) => passage(next, spec.text!, tokens);
  const systems = Array.from({ length: spec.tenants }, (_, t) =>
    `tenant ${t} policy: ${fill(Math.max(0, spec.systemTokens - 3))}`);
  const jobs: Job[] = [];
  let left = spec.requests;
  let i = 0;
  while (left > 0) {
    const chat = spec.kind === 'chat' || (spec.kind === 'mixed' && i % 2 === 1);
    const tenant = Math.floor(next() * spec.tenants);
    const preamble: Message[] = [{ role: 'system', content: systems[tenant] }];
    if (chat) {
      const turns = Math.min(left, spec.turns);
      jobs.push({ kind: 'chat', preamble, turns: Array.from({ length: turns }, () => fill(spec.turnTokens)) });
      left -= turns;
    } else {
      jobs.push({ kind: 'shared-prefix', preamble, turns: [fill(spec.questionTokens)] });
      left -= 1;
    }
    i++;
  }
  return jobs;
}

/** What one request measured. */
export interface RequestSample {
  readonly ok: boolean;
  /** Seconds to the first content token. */
  readonly ttft: number;
  /** Seconds per output token after the first (NaN with fewer than two tokens). */
  readonly tpot: number;
  readonly outputTokens: number;
  /** X-Disagg-Endpoint of the answer. */
  readonly endpoint: string;
  /** X-Disagg-Prefill-Endpoint of the answer: the prefill leg's endpoint; '' when served whole. */
  readonly prefillEndpoint: string;
  readonly error?: string;
}

/**
 * Sends one streamed chat completion, or with `api` completions one streamed completion of
 * completionPrompt(messages) (plain fetch; SSE parsed here), and measures it.
 * Returns the generated text too, for the next chat turn.
 */
export async function sendChat(baseUrl: string, model: string, messages: Message[], maxTokens: number,
  signal: AbortSignal, api: RequestApi = 'chat'): Promise<{ sample: RequestSample; text: string }> {
  const t0 = performance.now();
  const fail = (error: string) => ({ sample: { ok: false, ttft: NaN, tpot: NaN, outputTokens: 0, endpoint: '', prefillEndpoint: '', error }, text: '' });
  let res: Response;
  try {
    const body = api === 'chat' ? { model, messages } : { model, prompt: completionPrompt(messages) };
    res = await fetch(`${baseUrl}/v1/${api === 'chat' ? 'chat/completions' : 'completions'}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ...body, max_tokens: maxTokens, stream: true, stream_options: { include_usage: true } }),
      signal,
    });
  } catch (e) {
    return fail((e as Error).message);
  }
  const endpoint = res.headers.get('x-disagg-endpoint') ?? '';
  const prefillEndpoint = res.headers.get('x-disagg-prefill-endpoint') ?? '';
  if (res.status !== 200 || !res.body) {
    return fail(`HTTP ${res.status}: ${(await res.text().catch(() => '')).slice(0, 200)}`);
  }
  let buffer = '';
  let text = '';
  let tokens = 0;
  let tFirst = NaN;
  let tLast = NaN;
  let error: string | undefined;
  const decoder = new TextDecoder();
  try {
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      buffer += decoder.decode(chunk, { stream: true });
      let nl: number;
      while ((nl = buffer.indexOf('\n\n')) >= 0) {
        const event = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 2);
        const data = event.split('\n').filter(l => l.startsWith('data:')).map(l => l.slice(5).trim()).join('');
        if (!data || data === '[DONE]') continue;
        const parsed = JSON.parse(data) as {
          error?: { message?: string };
          choices?: Array<{ delta?: { content?: string }; text?: string }>;
        };
        if (parsed.error) {
          error = parsed.error.message ?? 'stream error';
          continue;
        }
        // Chat chunks carry delta.content, completion chunks text.
        const piece = parsed.choices?.[0]?.delta?.content ?? parsed.choices?.[0]?.text;
        if (piece) {
          const now = performance.now();
          if (tokens === 0) tFirst = now;
          tLast = now;
          tokens++;
          text += piece;
        }
      }
    }
  } catch (e) {
    error = (e as Error).message;
  }
  if (error !== undefined || tokens === 0) {
    return fail(error ?? 'the stream carried no token');
  }
  return {
    sample: {
      ok: true,
      ttft: (tFirst - t0) / 1000,
      tpot: tokens > 1 ? (tLast - tFirst) / 1000 / (tokens - 1) : NaN,
      outputTokens: tokens,
      endpoint,
      prefillEndpoint,
    },
    text: text.trim(),
  };
}

/** Progress of a running workload. */
export interface WorkloadProgress {
  readonly done: number;
  readonly failed: number;
  readonly total: number;
  readonly samples: readonly RequestSample[];
}

/**
 * Runs `jobs` with `concurrency` clients against `baseUrl`, for at most `timeoutMs` (no new
 * request starts after it; requests in flight are aborted). `onProgress` is called after each request.
 */
export async function runJobs(baseUrl: string, model: string, jobs: Job[], options: {
  readonly concurrency: number;
  readonly maxTokens: number;
  /** @default 'chat' */
  readonly api?: RequestApi;
  readonly timeoutMs: number;
  readonly onProgress?: (p: WorkloadProgress) => void;
}): Promise<{ samples: RequestSample[]; seconds: number; timedOut: boolean }> {
  const total = jobs.reduce((n, j) => n + j.turns.length, 0);
  const samples: RequestSample[] = [];
  const abort = new AbortController();
  const deadline = setTimeout(() => abort.abort(), options.timeoutMs);
  const t0 = performance.now();
  let nextJob = 0;
  let failed = 0;
  const client = async () => {
    while (!abort.signal.aborted && nextJob < jobs.length) {
      const job = jobs[nextJob++];
      const messages: Message[] = [...job.preamble];
      for (const turn of job.turns) {
        if (abort.signal.aborted) return;
        messages.push({ role: 'user', content: turn });
        const { sample, text } = await sendChat(baseUrl, model, messages, options.maxTokens, abort.signal, options.api);
        if (abort.signal.aborted && !sample.ok) return; // cut by the time limit: not a failure
        samples.push(sample);
        if (!sample.ok) failed++;
        options.onProgress?.({ done: samples.length, failed, total, samples });
        if (!sample.ok) break; // the rest of this conversation cannot go on
        messages.push({ role: 'assistant', content: text });
      }
    }
  };
  try {
    await Promise.all(Array.from({ length: Math.max(1, options.concurrency) }, client));
  } finally {
    clearTimeout(deadline);
  }
  return { samples, seconds: (performance.now() - t0) / 1000, timedOut: abort.signal.aborted };
}

/** Nearest-rank percentile of `values` (NaN when empty). */
export function percentile(values: readonly number[], p: number): number {
  const v = values.filter(x => Number.isFinite(x)).sort((a, b) => a - b);
  if (v.length === 0) return NaN;
  return v[Math.min(v.length - 1, Math.max(0, Math.ceil((p / 100) * v.length) - 1))];
}
