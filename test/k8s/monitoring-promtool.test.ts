// The monitoring's PromQL through promtool (Debian's `prometheus` package; CI installs it): the
// PrometheusRule's groups pass `promtool check rules`, every alert fires on synthetic series made for it
// and stays quiet on series that look alike but must not page (`promtool test rules`), and every
// dashboard panel's expression parses (one recording rule per expression). Without promtool each test
// says SKIPPED and passes.
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { stringify } from 'yaml';
import { deepseekEpPdProps, defaultProps, find, monitoredProps, synthInference } from './util';
import { Autoscaler, DisaggregatedInferenceProps, KvTransfer, Monitoring } from '../../src';

/** promtool on PATH (or Debian's /usr/bin/promtool). */
const PROMTOOL = [...(process.env.PATH ?? '').split(path.delimiter), '/usr/bin'].map(d => path.join(d, 'promtool')).find(f => fs.existsSync(f));

function skipped(what: string): boolean {
  if (PROMTOOL === undefined) {
    // eslint-disable-next-line no-console
    console.warn(`SKIPPED ${what}: promtool is not installed (Debian's prometheus package; CI has it)`);
    return true;
  }
  return false;
}

/** Runs promtool with YAML files written to a fresh folder; returns its status and output. */
function promtool(args: string[], files: Record<string, unknown>): { status: number | null; output: string } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'disagg-promtool-'));
  try {
    for (const [name, content] of Object.entries(files)) {
      fs.writeFileSync(path.join(dir, name), stringify(content, { lineWidth: 0 }));
    }
    const r = spawnSync(PROMTOOL!, args, { cwd: dir, encoding: 'utf8', timeout: 120_000 });
    return { status: r.status, output: `${r.stdout}${r.stderr}` };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** The PrometheusRule's groups as a rules file. */
function ruleGroups(props: DisaggregatedInferenceProps): any[] {
  return find(synthInference(props).manifests, 'PrometheusRule').spec.groups;
}

/** The series of deployment 'llama' in namespace 'inference'. */
function s(metric: string, labels?: string): string {
  return `${metric}{deployment="llama",namespace="inference"${labels ? `,${labels}` : ''}}`;
}

/** One promtool unit test: input series (1-minute samples), and the alerts of one name firing at evalTime. */
interface AlertCase {
  readonly name: string;
  readonly alert: string;
  readonly series: Record<string, string>;
  readonly evalTime: string;
  /** The labels of each alert that must fire: none for a case that must stay quiet. */
  readonly fires: Array<Record<string, string>>;
}

/**
 * Runs the cases against the groups. The annotations are dropped from the copy under test (promtool
 * compares them too, and they are text); `promtool check rules` parses them, templates included.
 */
function testRules(groups: any[], cases: AlertCase[]): { status: number | null; output: string } {
  const bare = groups.map(g => ({ ...g, rules: g.rules.map(({ annotations: _a, ...rule }: any) => rule) }));
  return promtool(['test', 'rules', 'tests.yaml'], {
    'rules.yaml': { groups: bare },
    'tests.yaml': {
      rule_files: ['rules.yaml'],
      evaluation_interval: '1m',
      tests: cases.map(c => ({
        name: c.name,
        interval: '1m',
        input_series: Object.entries(c.series).map(([series, values]) => ({ series, values })),
        alert_rule_test: [{ eval_time: c.evalTime, alertname: c.alert, exp_alerts: c.fires.map(labels => ({ exp_labels: labels })) }],
      })),
    },
  });
}

/** An emitted alert as the cases name it: its name, and its burn rate for the SLO pairs. */
function key(alert: string, labels: Record<string, string>): string {
  return labels.burn_rate ? `${alert} ${labels.burn_rate}x` : alert;
}

// SLO burn rate: TTFT misses and meets per minute (TPOT always met); 4 hours of samples.
function slo(missed: string, met: string): Record<string, string> {
  return {
    [s('disagg_router_slo_requests_total', 'objective="ttft",result="missed"')]: missed,
    [s('disagg_router_slo_requests_total', 'objective="ttft",result="met"')]: met,
    [s('disagg_router_slo_requests_total', 'objective="tpot",result="missed"')]: '0+0x240',
    [s('disagg_router_slo_requests_total', 'objective="tpot",result="met"')]: '0+100x240',
  };
}
function pair(burnRate: string, severity: string, long: string, short: string): Record<string, string> {
  return { severity, burn_rate: burnRate, long_window: long, short_window: short, objective: 'ttft' };
}
const FAST_PAGE = pair('14.4', 'page', '1h', '5m');
const SLOW_PAGE = pair('6', 'page', '6h', '30m');
const FAST_TICKET = pair('3', 'ticket', '1d', '2h');
const SLOW_TICKET = pair('1', 'ticket', '3d', '6h');
const burn = (name: string, series: Record<string, string>, fires: Array<Record<string, string>>): AlertCase =>
  ({ name, alert: 'DisaggSloBudgetBurn', series, evalTime: '4h', fires });

/** With a 1% budget (targetShare 0.99): thresholds 0.144, 0.06, 0.03 and 0.01. */
const BURN_1_PERCENT: AlertCase[] = [
  burn('20% missed: every pair fires, 14.4x too', slo('0+20x240', '0+80x240'), [FAST_PAGE, SLOW_PAGE, FAST_TICKET, SLOW_TICKET]),
  burn('10% missed: 6x pages, 14.4x does not', slo('0+10x240', '0+90x240'), [SLOW_PAGE, FAST_TICKET, SLOW_TICKET]),
  burn('5% missed: tickets, no page', slo('0+5x240', '0+95x240'), [FAST_TICKET, SLOW_TICKET]),
  burn('0.5% missed: within the budget', slo('0+1x240', '0+199x240'), []),
  // 20% missed for 3 hours, none since: the pages' short windows (5m, 30m) are clean an hour later.
  burn('a burn that stopped an hour ago pages no more', slo('0+20x180 3600+0x59', '0+80x180 14500+100x59'), [FAST_TICKET, SLOW_TICKET]),
];

/** With the default 10% budget (targetShare 0.9): 14.4 x 0.1 >= 1 is left out; thresholds 0.6, 0.3 and 0.1. */
const BURN_10_PERCENT: AlertCase[] = [
  burn('every request missed: the three pairs that can fire do', slo('0+100x240', '0+0x240'), [SLOW_PAGE, FAST_TICKET, SLOW_TICKET]),
  burn('40% missed: tickets only', slo('0+40x240', '0+60x240'), [FAST_TICKET, SLOW_TICKET]),
  burn('5% missed: within the budget', slo('0+5x240', '0+95x240'), []),
];

const PAIR = 'prefill="10.0.0.1:8000",decode="10.0.1.1:8000"';
const endpoint = (ep: string, router = 'llama-router-0') => `pool="decode",role="decode",endpoint="${ep}",pod="${router}"`;

/** Every other alert, on deployment 'llama' with EFA and the decode pool autoscaled to 4 replicas. */
const OTHERS: AlertCase[] = [
  {
    name: 'NIXL transfers and the router\'s decode-only retries keep failing',
    alert: 'DisaggKvTransferFailing',
    series: {
      [s('vllm:nixl_num_failed_transfers_total', 'pool="decode",pod="llama-decode-0"')]: '0+2x30',
      [s('vllm:nixl_num_failed_notifications_total', 'pool="decode",pod="llama-decode-0"')]: '0+0x30',
      [s('disagg_router_kv_transfer_fallbacks_total', 'pod="llama-router-0"')]: '0+1x30',
    },
    evalTime: '20m',
    fires: [{ severity: 'ticket', source: 'nixl_failed_transfers' }, { severity: 'ticket', source: 'router_kv_transfer_fallbacks' }],
  },
  {
    name: 'one failed transfer, and failures long past, do not fire',
    alert: 'DisaggKvTransferFailing',
    series: {
      [s('vllm:nixl_num_failed_transfers_total', 'pool="decode",pod="llama-decode-0"')]: '0+0x5 1+0x25',
      [s('vllm:nixl_num_failed_notifications_total', 'pool="decode",pod="llama-decode-0"')]: '7+0x30',
    },
    evalTime: '20m',
    fires: [],
  },
  {
    name: '2 transfers/s of 100 MB at 200 MB/s: a pair on TCP',
    alert: 'DisaggKvTransferOnTcp',
    series: {
      [s('disagg_router_kv_transfer_seconds_count', PAIR)]: '0+120x40',
      [s('disagg_router_kv_transfer_bytes_total', PAIR)]: '0+12000000000x40',
      [s('disagg_router_kv_transfer_seconds_sum', PAIR)]: '0+60x40',
    },
    evalTime: '30m',
    fires: [{ severity: 'ticket', prefill: '10.0.0.1:8000', decode: '10.0.1.1:8000' }],
  },
  {
    name: 'the same transfers at 10 GB/s: EFA',
    alert: 'DisaggKvTransferOnTcp',
    series: {
      [s('disagg_router_kv_transfer_seconds_count', PAIR)]: '0+120x40',
      [s('disagg_router_kv_transfer_bytes_total', PAIR)]: '0+12000000000x40',
      [s('disagg_router_kv_transfer_seconds_sum', PAIR)]: '0+1.2x40',
    },
    evalTime: '30m',
    fires: [],
  },
  {
    name: 'a slow pair with fewer than 20 transfers in 15 minutes is left alone',
    alert: 'DisaggKvTransferOnTcp',
    series: {
      [s('disagg_router_kv_transfer_seconds_count', PAIR)]: '0+0.5x40',
      [s('disagg_router_kv_transfer_bytes_total', PAIR)]: '0+50000000x40',
      [s('disagg_router_kv_transfer_seconds_sum', PAIR)]: '0+0.25x40',
    },
    evalTime: '30m',
    fires: [],
  },
  {
    // Both routers report the worker's one counter: 300 real against 1000 predicted tokens/s (not 600).
    name: 'workers hit 30% of the prefix tokens two routers predicted',
    alert: 'DisaggPrefixHitsBelowPrediction',
    series: {
      [s('disagg_router_endpoint_predicted_prefix_hit_tokens_total', endpoint('10.0.1.1:8000'))]: '0+30000x60',
      [s('disagg_router_endpoint_predicted_prefix_hit_tokens_total', endpoint('10.0.1.1:8000', 'llama-router-1'))]: '0+30000x60',
      [s('disagg_router_endpoint_worker_prefix_cache_hits_total', endpoint('10.0.1.1:8000'))]: '0+18000x60',
      [s('disagg_router_endpoint_worker_prefix_cache_hits_total', endpoint('10.0.1.1:8000', 'llama-router-1'))]: '0+18000x60',
    },
    evalTime: '50m',
    fires: [{ severity: 'warning', pool: 'decode' }],
  },
  {
    name: 'workers hit 70% of the predicted prefix tokens',
    alert: 'DisaggPrefixHitsBelowPrediction',
    series: {
      [s('disagg_router_endpoint_predicted_prefix_hit_tokens_total', endpoint('10.0.1.1:8000'))]: '0+60000x60',
      [s('disagg_router_endpoint_worker_prefix_cache_hits_total', endpoint('10.0.1.1:8000'))]: '0+42000x60',
    },
    evalTime: '50m',
    fires: [],
  },
  {
    name: 'no hits at all, but only 50 predicted tokens/s',
    alert: 'DisaggPrefixHitsBelowPrediction',
    series: {
      [s('disagg_router_endpoint_predicted_prefix_hit_tokens_total', endpoint('10.0.1.1:8000'))]: '0+3000x60',
      [s('disagg_router_endpoint_worker_prefix_cache_hits_total', endpoint('10.0.1.1:8000'))]: '0+0x60',
    },
    evalTime: '50m',
    fires: [],
  },
  {
    // Against the pool's mean (1.25) one of two endpoints could never reach 2x; against the other's (0.5) it can.
    name: 'of two endpoints, one takes 2 requests/s through two routers and the other 0.5',
    alert: 'DisaggEndpointHerding',
    series: {
      [s('disagg_router_endpoint_requests_total', endpoint('10.0.1.1:8000'))]: '0+60x30',
      [s('disagg_router_endpoint_requests_total', endpoint('10.0.1.1:8000', 'llama-router-1'))]: '0+60x30',
      [s('disagg_router_endpoint_requests_total', endpoint('10.0.1.2:8000'))]: '0+30x30',
    },
    evalTime: '25m',
    fires: [{ severity: 'warning', pool: 'decode', endpoint: '10.0.1.1:8000' }],
  },
  {
    name: 'three endpoints within 25% of each other',
    alert: 'DisaggEndpointHerding',
    series: {
      [s('disagg_router_endpoint_requests_total', endpoint('10.0.1.1:8000'))]: '0+60x30',
      [s('disagg_router_endpoint_requests_total', endpoint('10.0.1.2:8000'))]: '0+48x30',
      [s('disagg_router_endpoint_requests_total', endpoint('10.0.1.3:8000'))]: '0+54x30',
    },
    evalTime: '25m',
    fires: [],
  },
  {
    name: 'a lopsided pool at 0.3 requests/s, and a pool of one endpoint',
    alert: 'DisaggEndpointHerding',
    series: {
      [s('disagg_router_endpoint_requests_total', endpoint('10.0.1.1:8000'))]: '0+18x30',
      [s('disagg_router_endpoint_requests_total', endpoint('10.0.1.2:8000'))]: '0+3x30',
      [s('disagg_router_endpoint_requests_total', 'pool="prefill",role="prefill",endpoint="10.0.0.1:8000",pod="llama-router-0"')]: '0+120x30',
    },
    evalTime: '25m',
    fires: [],
  },
  {
    name: 'decode at its 4 endpoints with SLO pressure 1.3 for 30 minutes',
    alert: 'DisaggAutoscalerAtMax',
    series: {
      [s('disagg_router_pool_ready_endpoints', 'pool="decode",pod="llama-router-0"')]: '4+0x40',
      [s('disagg_router_pool_slo_pressure', 'pool="decode",pod="llama-router-0"')]: '1.3+0x40',
    },
    evalTime: '35m',
    fires: [{ severity: 'ticket', pool: 'decode' }],
  },
  {
    name: 'decode at its maximum within the SLO; prefill (not autoscaled) over it',
    alert: 'DisaggAutoscalerAtMax',
    series: {
      [s('disagg_router_pool_ready_endpoints', 'pool="decode",pod="llama-router-0"')]: '4+0x40',
      [s('disagg_router_pool_slo_pressure', 'pool="decode",pod="llama-router-0"')]: '0.9+0x40',
      [s('disagg_router_pool_ready_endpoints', 'pool="prefill",pod="llama-router-0"')]: '2+0x40',
      [s('disagg_router_pool_slo_pressure', 'pool="prefill",pod="llama-router-0"')]: '5+0x40',
    },
    evalTime: '35m',
    fires: [],
  },
  {
    name: 'decode over its SLO below its maximum: the autoscaler can still act',
    alert: 'DisaggAutoscalerAtMax',
    series: {
      [s('disagg_router_pool_ready_endpoints', 'pool="decode",pod="llama-router-0"')]: '3+0x40',
      [s('disagg_router_pool_slo_pressure', 'pool="decode",pod="llama-router-0"')]: '1.5+0x40',
    },
    evalTime: '35m',
    fires: [],
  },
  {
    // e1 is ejected every 2 minutes; e2 unhealthy for 15 minutes; e3 ejected twice; e4 down for 5 minutes.
    name: 'a worker ejected over and over and one unhealthy for 15 minutes fire; two ejections or a short outage do not',
    alert: 'DisaggWorkerFailingHealth',
    series: {
      [s('disagg_router_endpoint_ejections_total', endpoint('e1'))]: '0+0.5x40',
      [s('disagg_router_endpoint_healthy', endpoint('e1'))]: '1+0x40',
      [s('disagg_router_endpoint_healthy', endpoint('e2'))]: '1+0x20 0+0x19',
      [s('disagg_router_endpoint_ejections_total', endpoint('e3'))]: '0+0x10 1+0x10 2+0x19',
      [s('disagg_router_endpoint_healthy', endpoint('e3'))]: '1+0x40',
      [s('disagg_router_endpoint_healthy', endpoint('e4'))]: '1+0x20 0+0x4 1+0x14',
    },
    evalTime: '35m',
    fires: ['e1', 'e2'].map(e => ({ severity: 'ticket', endpoint: e, pool: 'decode', role: 'decode' })),
  },
];

/** The configurations the rules are checked in: an SLO met by 99% or 90% of requests (the default), EFA, an autoscaled pool. */
const STRICT = monitoredProps();
const DEFAULT_SHARE = monitoredProps(undefined, { slo: { ttftSeconds: 2, tpotSeconds: 0.05 } });

describe('monitoring: promtool', () => {
  test('promtool check rules accepts the PrometheusRule\'s groups (expressions, durations, templates)', () => {
    if (skipped('promtool check rules')) return;
    // GIVEN the rule groups of several configurations
    const configs = [STRICT, DEFAULT_SHARE, defaultProps({ name: 'plain', monitoring: Monitoring.prometheusOperator(), kvTransfer: KvTransfer.NIXL_UCX })];
    for (const props of configs) {
      // WHEN checked THEN promtool accepts them
      const { status, output } = promtool(['check', 'rules', 'rules.yaml'], { 'rules.yaml': { groups: ruleGroups(props) } });
      expect(output).toMatch(/SUCCESS: \d+ rules found/);
      expect(status).toBe(0);
    }
  });

  test.each([
    ['a 1% budget', STRICT, [...BURN_1_PERCENT, ...OTHERS]],
    ['the default 10% budget', DEFAULT_SHARE, BURN_10_PERCENT],
  ])('every alert fires on series made for it and stays quiet on look-alikes, with %s', (_budget, props, cases) => {
    if (skipped('promtool test rules')) return;
    // GIVEN the rules, and cases that cover every alert the configuration emits (each burn-rate pair apart)
    const groups = ruleGroups(props);
    const emitted = new Set<string>(groups.flatMap(g => g.rules.map((r: any) => key(r.alert, r.labels))));
    const fired = new Set(cases.flatMap(c => c.fires.map(labels => key(c.alert, labels))));
    const relevant = cases === BURN_10_PERCENT ? [...emitted].filter(k => k.startsWith('DisaggSloBudgetBurn')) : [...emitted];
    expect([...fired].sort()).toEqual(relevant.sort());
    // WHEN promtool runs the cases
    const { status, output } = testRules(groups, cases);
    // THEN each fires exactly the alerts it names (so no emitted rule is unfireable)
    expect(output).toMatch(/SUCCESS/);
    expect(status).toBe(0);
  });

  test('a wrong expectation fails promtool (the cases are really checked)', () => {
    if (skipped('promtool test rules')) return;
    // GIVEN a case that says a within-budget burn pages
    const wrong = burn('0.5% missed said to page', slo('0+1x240', '0+199x240'), [FAST_PAGE]);
    // WHEN run THEN promtool fails on it
    const { status, output } = testRules(ruleGroups(STRICT), [wrong]);
    expect(status).not.toBe(0);
    expect(output).toMatch(/0.5% missed said to page/);
  });

  test('every dashboard panel\'s expression parses', () => {
    if (skipped('promtool check rules (panels)')) return;
    // GIVEN the panels of several configurations (SLO, price, autoscaling, HPAs, expert parallelism, none of those)
    const configs: DisaggregatedInferenceProps[] = [
      STRICT,
      defaultProps({ name: 'plain', monitoring: Monitoring.prometheusOperator(), kvTransfer: KvTransfer.NIXL_UCX }),
      deepseekEpPdProps({ autoscaling: { maxReplicas: 3 } }, {
        name: 'ds',
        slo: { ttftSeconds: 4, tpotSeconds: 0.1 },
        autoscaler: Autoscaler.HPA,
        monitoring: Monitoring.prometheusOperator({ instancePricePerHour: 70 }),
      }),
    ];
    const exprs = configs.flatMap(props => Object.values(synthInference(props).inference.dashboards)
      .flatMap(json => JSON.parse(json).panels.flatMap((p: any) => p.targets.map((t: any) => t.expr as string))));
    expect(exprs.length).toBeGreaterThan(100);
    // WHEN each is a recording rule, with Grafana's $__rate_interval as 5m
    const rules = exprs.map((expr, n) => ({ record: `disagg:panel_${n}`, expr: expr.replace(/\$__rate_interval/g, '5m') }));
    for (const r of rules) {
      expect(r.expr).not.toContain('$');
    }
    const { status, output } = promtool(['check', 'rules', 'panels.yaml'], { 'panels.yaml': { groups: [{ name: 'panels', rules }] } });
    // THEN promtool parses them all
    expect(output).toContain(`SUCCESS: ${rules.length} rules found`);
    expect(status).toBe(0);
  });
});
