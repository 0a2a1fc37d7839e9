/**
 * Where a local run's requests spent their time, from the router's per-request phase histograms
 * (`disagg_router_request_phase_seconds{path, phase}`, engine/src/servers/router/request_phases.h):
 * the phases before the first byte add up to a streamed request's TTFT, all of them to its E2E.
 */

/** The phases in the order a request meets them. */
export const PHASES = ['queue', 'route', 'prefill', 'kv_transfer', 'first_token', 'decode'] as const;
export type PhaseName = typeof PHASES[number];

/** Mean seconds per request of each phase, for the requests of one path. */
export interface PhaseBreakdown {
  /** 'pd': through a prefill endpoint with a KV transfer; 'aggregated': one worker. */
  readonly path: 'pd' | 'aggregated';
  /** Requests of that path the router served. */
  readonly requests: number;
  /** Mean seconds per request; phases a path does not have are absent. */
  readonly meanSeconds: Partial<Record<PhaseName, number>>;
}

/**
 * The breakdown of each path that served requests, P/D first, from the text of the router's
 * /metrics page. Empty when the router exported no phases (an older engine).
 */
export function phaseBreakdowns(page: string): PhaseBreakdown[] {
  const sums = new Map<string, number>();
  const counts = new Map<string, number>();
  const re = /^disagg_router_request_phase_seconds_(sum|count)\{path="(pd|aggregated)",phase="(\w+)"\}\s+(\S+)$/gm;
  for (let m = re.exec(page); m !== null; m = re.exec(page)) {
    (m[1] === 'sum' ? sums : counts).set(`${m[2]}/${m[3]}`, Number(m[4]));
  }
  const out: PhaseBreakdown[] = [];
  for (const path of ['pd', 'aggregated'] as const) {
    // Every served request observes its queue phase once: the path's request count.
    const requests = counts.get(`${path}/queue`) ?? 0;
    if (requests === 0) continue;
    const meanSeconds: Partial<Record<PhaseName, number>> = {};
    for (const phase of PHASES) {
      const sum = sums.get(`${path}/${phase}`);
      if (sum !== undefined && (counts.get(`${path}/${phase}`) ?? 0) > 0) meanSeconds[phase] = sum / requests;
    }
    out.push({ path, requests, meanSeconds });
  }
  return out;
}

const LABELS: Record<PhaseName, string> = {
  queue: 'queue', route: 'route', prefill: 'prefill', kv_transfer: 'KV transfer', first_token: 'first token', decode: 'decode',
};

/**
 * One line: each phase's mean, and the TTFT and E2E they add up to, e.g.
 * `P/D (40 requests): queue 0.1 ms + route 0.4 ms + prefill 80 ms + KV transfer 12 ms + first token 20 ms = TTFT 112 ms; + decode 1.1 s = E2E 1.21 s`.
 */
export function formatBreakdown(b: PhaseBreakdown, fmt: (seconds: number) => string): string {
  const before = PHASES.filter(p => p !== 'decode' && b.meanSeconds[p] !== undefined);
  const ttft = before.reduce((s, p) => s + b.meanSeconds[p]!, 0);
  const decode = b.meanSeconds.decode ?? 0;
  const parts = before.map(p => `${LABELS[p]} ${fmt(b.meanSeconds[p]!)}`).join(' + ');
  return `${b.path === 'pd' ? 'P/D' : 'aggregated'} (${b.requests} requests): ${parts} = TTFT ${fmt(ttft)}; + decode ${fmt(decode)} = E2E ${fmt(ttft + decode)}`;
}
