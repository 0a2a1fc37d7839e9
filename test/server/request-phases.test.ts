// End to end: where a P/D request's time goes, as the router measures it (request_phases.h), on real
// processes over loopback. A prefill and a decode sim-worker behind a P/D router; streamed requests
// through the openai SDK; then the router's phase histograms must add up to the TTFT and E2E it
// reports, its per-pair KV transfer series must count every transfer, and the decode worker must
// report the pulls under vLLM's NIXL metric names.
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import OpenAI from 'openai';
import { CONFIG, describeIfRoles, engineProcesses, metrics, prompt, total, waitFor } from './util';

const describeIfBuilt = describeIfRoles('request phase tests', 'router', 'sim-worker');
const MODEL = 'llama-3.3-70b';
const start = engineProcesses();

jest.setTimeout(120_000);

/** The value of the sample `family{labels}` whose labels include every `parts`; 0 when absent. */
function sample(m: Map<string, number>, family: string, ...parts: string[]): number {
  let sum = 0;
  for (const [k, v] of m) if (k.startsWith(`${family}{`) && parts.every((p) => k.includes(p))) sum += v;
  return sum;
}

describeIfBuilt('the router measures every phase of a P/D request', () => {
  test('phases add up to TTFT and E2E; every transfer is counted per pair and on the decode worker', async () => {
    // GIVEN a prefill and a decode sim-worker (slowed to 1/20 of real time: phases of milliseconds)
    const worker = (role: string) => start(['sim-worker', '--config', CONFIG, '--port', '0', '--speedup', '20', '--role', role]);
    const [prefill, decode] = await Promise.all([worker('prefill'), worker('decode')]);
    // AND a P/D router told the pools' transport and KV size, with an SLO to count against
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'disagg-phases-'));
    const config = path.join(dir, 'router.json');
    fs.writeFileSync(config, JSON.stringify({
      router: { kvTransfer: { backend: 'LIBFABRIC', bytesPerToken: 327680 } },
      autoscaling: { slo: { ttftSeconds: 5, tpotSeconds: 0.5 } },
    }));
    const router = await start(['router', '--config', config, '--host', '127.0.0.1', '--port', '0', '--model-name', MODEL,
      '--health-interval-ms', '200', '--scrape-interval-ms', '200', '--policy', 'disagg', '--min-uncached-tokens', '32',
      '--endpoint', `role=prefill,url=${prefill.url}`, '--endpoint', `role=decode,url=${decode.url}`]);
    await waitFor(async () => (await fetch(`${router.url}/ready`)).status === 200, 10_000, 'router ready');

    // WHEN 8 streamed completions and chats with long prompts go through it, one at a time (so that the
    // prefill pool is never saturated and every request goes P/D)
    const client = new OpenAI({ baseURL: `${router.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 60_000 });
    const one = async (i: number) => {
      let text = '';
      if (i % 2 === 0) {
        for await (const c of await client.completions.create({ model: MODEL, prompt: prompt(`ph${i}-`, 300), max_tokens: 16, stream: true })) {
          text += c.choices[0]?.text ?? '';
        }
      } else {
        for await (const c of await client.chat.completions.create({
          model: MODEL, messages: [{ role: 'user', content: prompt(`ph${i}-`, 300) }], max_tokens: 16, stream: true,
        })) {
          text += c.choices[0]?.delta?.content ?? '';
        }
      }
      return text;
    };
    for (let i = 0; i < 8; i++) expect((await one(i)).length).toBeGreaterThan(0);
    fs.rmSync(dir, { recursive: true, force: true });
    const m = await metrics(router);

    // THEN every request went P/D and observed each of its phases once
    const phase = (name: string, what: '_sum' | '_count') => sample(m, `disagg_router_request_phase_seconds${what}`, 'path="pd"', `phase="${name}"`);
    for (const p of ['queue', 'route', 'prefill', 'kv_transfer', 'first_token', 'decode']) expect(phase(p, '_count')).toBe(8);
    expect(sample(m, 'disagg_router_request_phase_seconds_count', 'path="aggregated"')).toBe(0);
    // AND the phases before the first byte add up to the TTFT the router reports, all of them to its E2E (5%)
    const ttft = total(m, 'disagg_router_ttft_seconds_sum');
    const e2e = total(m, 'disagg_router_e2e_seconds_sum');
    const beforeFirst = ['queue', 'route', 'prefill', 'kv_transfer', 'first_token'].reduce((s, p) => s + phase(p, '_sum'), 0);
    expect(Math.abs(beforeFirst - ttft) / ttft).toBeLessThan(0.05);
    expect(Math.abs(beforeFirst + phase('decode', '_sum') - e2e) / e2e).toBeLessThan(0.05);
    // AND the prefill leg and the transfer took time: the workers' modelled work, slowed 20 times
    expect(phase('prefill', '_sum') / 8).toBeGreaterThan(0.001);
    expect(phase('kv_transfer', '_sum')).toBeGreaterThan(0);

    // AND the pair's transfers are counted with their bytes (300-word prompts: full 16-token blocks x 327680 B)
    const pair = [`prefill="${new URL(prefill.url).host}"`, `decode="${new URL(decode.url).host}"`];
    expect(sample(m, 'disagg_router_kv_transfer_seconds_count', ...pair)).toBe(8);
    const bytes = sample(m, 'disagg_router_kv_transfer_bytes_total', ...pair);
    expect(bytes).toBeGreaterThan(0);
    expect(bytes % (16 * 327680)).toBe(0);
    expect(sample(m, 'disagg_router_kv_transport_info', 'backend="LIBFABRIC"', 'provider="efa"')).toBe(1);
    // AND each streamed request counted once against each objective
    expect(sample(m, 'disagg_router_slo_requests_total', 'objective="ttft"')).toBe(8);
    expect(sample(m, 'disagg_router_slo_requests_total', 'objective="tpot"')).toBe(8);
    expect(sample(m, 'disagg_router_slo_target_seconds', 'objective="ttft"')).toBe(5);

    // AND the decode worker reports the eight pulls as vLLM does (their time is part of the router's
    // kv_transfer phase, with the handshake and admission; not compared: the phase's first-step estimate
    // is a mean inter-token gap, which a loaded machine stretches)
    const d = await metrics(decode);
    expect(total(d, 'vllm:nixl_xfer_time_seconds_count')).toBe(8);
    expect(total(d, 'vllm:nixl_xfer_time_seconds_sum')).toBeGreaterThan(0);
    expect(total(d, 'vllm:nixl_bytes_transferred_sum')).toBeGreaterThan(0);
    expect(total(d, 'vllm:nixl_num_failed_transfers_total')).toBe(0);
  });
});
