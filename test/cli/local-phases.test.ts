// The phase breakdown `disagg local` prints, from the router's phase histograms.
import { formatBreakdown, phaseBreakdowns } from '../../src/cli/local/phases';

const PAGE = [
  '# TYPE disagg_router_request_phase_seconds histogram',
  'disagg_router_request_phase_seconds_bucket{path="pd",phase="queue",le="+Inf"} 4',
  'disagg_router_request_phase_seconds_sum{path="pd",phase="queue"} 0.004',
  'disagg_router_request_phase_seconds_count{path="pd",phase="queue"} 4',
  'disagg_router_request_phase_seconds_sum{path="pd",phase="route"} 0.002',
  'disagg_router_request_phase_seconds_count{path="pd",phase="route"} 4',
  'disagg_router_request_phase_seconds_sum{path="pd",phase="prefill"} 0.4',
  'disagg_router_request_phase_seconds_count{path="pd",phase="prefill"} 4',
  'disagg_router_request_phase_seconds_sum{path="pd",phase="kv_transfer"} 0.04',
  'disagg_router_request_phase_seconds_count{path="pd",phase="kv_transfer"} 4',
  'disagg_router_request_phase_seconds_sum{path="pd",phase="first_token"} 0.08',
  'disagg_router_request_phase_seconds_count{path="pd",phase="first_token"} 4',
  'disagg_router_request_phase_seconds_sum{path="pd",phase="decode"} 4',
  'disagg_router_request_phase_seconds_count{path="pd",phase="decode"} 4',
  'disagg_router_request_phase_seconds_sum{path="aggregated",phase="queue"} 0',
  'disagg_router_request_phase_seconds_count{path="aggregated",phase="queue"} 0',
].join('\n');

const fmt = (s: number) => `${(s * 1000).toFixed(1)} ms`;

describe('disagg local phase breakdown', () => {
  test('means per request of the served path, adding up to TTFT and E2E', () => {
    // GIVEN a router page with four P/D requests and no aggregated one
    // WHEN read
    const [pd, ...rest] = phaseBreakdowns(PAGE);
    // THEN only the P/D path is there, each phase's mean over its four requests
    expect(rest).toEqual([]);
    expect(pd.path).toBe('pd');
    expect(pd.requests).toBe(4);
    expect(pd.meanSeconds.prefill).toBeCloseTo(0.1);
    expect(pd.meanSeconds.kv_transfer).toBeCloseTo(0.01);
    // AND the line adds the phases before the first byte into TTFT, all of them into E2E
    expect(formatBreakdown(pd, fmt)).toBe('P/D (4 requests): queue 1.0 ms + route 0.5 ms + prefill 100.0 ms + KV transfer 10.0 ms + '
      + 'first token 20.0 ms = TTFT 131.5 ms; + decode 1000.0 ms = E2E 1131.5 ms');
  });

  test('a page without phases (an older engine) gives none', () => {
    expect(phaseBreakdowns('disagg_router_requests_total{route="chat",outcome="ok"} 3\n')).toEqual([]);
  });
});
