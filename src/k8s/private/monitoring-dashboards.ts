import { createHash } from 'crypto';
import { DeploymentQueries, MonitoredDeployment, POOL_NAMES, PREFIX_REAL_OVER_PREDICTED_FLOOR, TCP_RATE_FLOOR_BYTES_PER_SECOND, burnRatePairs, num } from './monitoring-queries';

/**
 * A deployment's Grafana dashboards as JSON models (internal): SLO and goodput, the P/D phases, KV
 * transfer per pair, the prefix cache predicted against real, the autoscaler, and cost per million
 * tokens with a price. Panels query through the `datasource` template variable; their expressions name
 * the deployment literally (no template variable inside PromQL but Grafana's `$__rate_interval`).
 */

/** Grafana's rate window: at least four scrape intervals, stretched with the time range. */
const RI = '$__rate_interval';
/** The panels' data source: the dashboard's `datasource` variable. */
const DATASOURCE = { type: 'prometheus', uid: '${datasource}' };

/** One panel as the builders below write it. */
interface PanelSpec {
  readonly title: string;
  readonly description: string;
  /** Grafana unit id: 's', 'reqps', 'Bps', 'bytes', 'percentunit', 'currencyUSD', 'short'. */
  readonly unit: string;
  readonly targets: Array<{ readonly expr: string; readonly legend: string }>;
  /** A table of the instant values instead of a time series. */
  readonly table?: boolean;
  readonly stacked?: boolean;
  /** Constant lines drawn in red: SLO targets, ceilings, alert thresholds. */
  readonly lines?: number[];
  readonly max?: number;
}

/** The slugs, in the order the dashboards link to each other. */
export const DASHBOARD_SLUGS = ['slo', 'phases', 'kv-transfer', 'prefix-cache', 'autoscaler', 'cost'];

/** Every dashboard of the deployment, by slug (the cost dashboard only with a price). */
export function dashboardModels(d: MonitoredDeployment): Record<string, object> {
  const where = d.namespace ? `${d.namespace}/${d.name}` : d.name;
  const q = new DeploymentQueries(d);
  const titled: Array<[string, string, string, PanelSpec[]]> = [
    ['slo', 'SLO and goodput', 'Requests, goodput and latency against the SLO, as clients see them through the router.', sloPanels(d, q)],
    ['phases', 'P/D phases', 'Where a request\'s time goes: queue, route, prefill, KV transfer, first token and decode, and what vLLM reports per pool.',
      phasePanels(q)],
    ['kv-transfer', 'KV transfer per pair', 'KV cache moved from prefill to decode per endpoint pair, its rate and transport, and NIXL as vLLM reports it.',
      kvPanels(d, q)],
    ['prefix-cache', 'Prefix cache: predicted vs real', 'The prefix-cache hits the router predicted when it routed against those the workers report.',
      prefixPanels(q)],
    ['autoscaler', 'Autoscaler', 'Each pool\'s SLO pressure, the endpoints it has and the replicas its autoscaler asks for.', autoscalerPanels(d, q)],
  ];
  if (d.instancePricePerHour !== undefined) {
    titled.push(['cost', 'Cost per million tokens', `Instances at $${num(d.instancePricePerHour)} per hour against the tokens they serve.`,
      costPanels(d, q, d.instancePricePerHour)]);
  }
  const out: Record<string, object> = {};
  for (const [slug, title, description, panels] of titled) {
    out[slug] = dashboard(d, where, slug, `disagg ${where}: ${title}`, description, panels);
  }
  return out;
}

/** A dashboard's uid: stable, from the deployment's namespace and name and the slug (Grafana allows 40 characters). */
export function dashboardUid(d: Pick<MonitoredDeployment, 'name' | 'namespace'>, slug: string): string {
  const hash = createHash('sha256').update(`${d.namespace ?? ''}/${d.name}`).digest('hex').slice(0, 12);
  return `disagg-${hash}-${slug}`;
}

function dashboard(d: MonitoredDeployment, where: string, slug: string, title: string, description: string, specs: PanelSpec[]): object {
  const tag = `disagg-${where}`;
  return {
    uid: dashboardUid(d, slug),
    title,
    description,
    tags: ['disagg', tag],
    timezone: 'browser',
    schemaVersion: 39,
    version: 1,
    editable: true,
    graphTooltip: 1,
    time: { from: 'now-6h', to: 'now' },
    refresh: '30s',
    annotations: { list: [] },
    links: [{ title: `disagg ${where}`, type: 'dashboards', tags: [tag], asDropdown: true, includeVars: true, keepTime: true }],
    templating: {
      list: [{
        name: 'datasource',
        label: 'Prometheus',
        type: 'datasource',
        query: 'prometheus',
        current: {},
        hide: 0,
        includeAll: false,
        multi: false,
        options: [],
        refresh: 1,
        regex: '',
        skipUrlSync: false,
      }],
    },
    panels: specs.map((spec, i) => panel(spec, i + 1, (i % 2) * 12, Math.floor(i / 2) * 8)),
  };
}

function panel(spec: PanelSpec, id: number, x: number, y: number): object {
  const lines = spec.lines ?? [];
  const thresholds = {
    mode: 'absolute',
    steps: [{ color: 'green', value: null }, ...lines.map(value => ({ color: 'red', value }))],
  };
  return {
    id,
    type: spec.table ? 'table' : 'timeseries',
    title: spec.title,
    description: spec.description,
    datasource: DATASOURCE,
    gridPos: { x, y, w: 12, h: 8 },
    fieldConfig: {
      defaults: {
        unit: spec.unit,
        ...(spec.max !== undefined ? { min: 0, max: spec.max } : {}),
        thresholds,
        ...(spec.table ? {} : {
          custom: {
            drawStyle: 'line',
            lineWidth: 1,
            fillOpacity: spec.stacked ? 25 : 0,
            stacking: { mode: spec.stacked ? 'normal' : 'none', group: 'A' },
            thresholdsStyle: { mode: lines.length > 0 ? 'line' : 'off' },
          },
        }),
      },
      overrides: [],
    },
    options: spec.table ? { showHeader: true } : {
      legend: { displayMode: 'list', placement: 'bottom', showLegend: true },
      tooltip: { mode: 'multi', sort: 'desc' },
    },
    targets: spec.targets.map((t, i) => ({
      refId: String.fromCharCode(65 + i),
      datasource: DATASOURCE,
      expr: t.expr,
      legendFormat: t.legend,
      ...(spec.table ? { format: 'table', instant: true, range: false } : { range: true }),
    })),
  };
}

/** p50, p90 and p99 of a histogram, all series of the deployment together (`by` keeps more labels). */
function quantiles(q: DeploymentQueries, metric: string, by = '', extra?: string): Array<{ expr: string; legend: string }> {
  return [0.5, 0.9, 0.99].map(p => ({
    expr: `histogram_quantile(${p}, sum by (le${by ? `, ${by}` : ''}) (rate(${q.s(`${metric}_bucket`, extra)}[${RI}])))`,
    legend: `p${Math.round(p * 100)}${by ? ` ${by.split(', ').map(l => `{{${l}}}`).join(' ')}` : ''}`,
  }));
}

function sloPanels(d: MonitoredDeployment, q: DeploymentQueries): PanelSpec[] {
  const ok = `sum(rate(${q.s('disagg_router_requests_total', 'outcome="ok"')}[${RI}]))`;
  const panels: PanelSpec[] = [{
    title: 'Requests per second by outcome',
    description: 'Requests the router completed (disagg_router_requests_total), all replicas together.',
    unit: 'reqps',
    stacked: true,
    targets: [{ expr: `sum by (outcome) (rate(${q.s('disagg_router_requests_total')}[${RI}]))`, legend: '{{outcome}}' }],
  }];
  if (d.slo) {
    const budget = 1 - d.slo.targetShare;
    panels.push({
      title: 'Goodput',
      description: 'Successful requests per second less those that missed an SLO objective (a miss of both counts twice): a lower bound on ' +
        'the requests that met both targets.',
      unit: 'reqps',
      targets: [
        { expr: `clamp_min(${ok} - (sum(rate(${q.s('disagg_router_slo_requests_total', 'result="missed"')}[${RI}])) or vector(0)), 0)`, legend: 'goodput' },
        { expr: ok, legend: 'ok' },
      ],
    }, {
      title: 'SLO attainment per objective',
      description: `Share of requests that met each target (disagg_router_slo_requests_total); the line is targetShare (${num(d.slo.targetShare)}).`,
      unit: 'percentunit',
      max: 1,
      lines: [d.slo.targetShare],
      targets: [{ expr: `1 - (${q.sloMissRatio(RI)})`, legend: '{{objective}}' }],
    }, {
      title: 'Error budget burn rate',
      description: `Missed share / error budget (${num(budget * 100)}%) over 1 h and 6 h; 1 spends the budget in exactly 30 days. ` +
        'The lines are the burn rates that page (DisaggSloBudgetBurn).',
      unit: 'short',
      lines: burnRatePairs(budget).fire.filter(p => p.severity === 'page').map(p => p.factor),
      targets: ['1h', '6h'].map(w => ({ expr: `(${q.sloMissRatio(w)}) / ${num(budget)}`, legend: `{{objective}} ${w}` })),
    });
  } else {
    panels.push({
      title: 'Successful requests per second',
      description: 'The deployment has no SLO: goodput and burn rates need `slo`.',
      unit: 'reqps',
      targets: [{ expr: ok, legend: 'ok' }],
    });
  }
  // The router's own targets (disagg_router_slo_target_seconds) next to the quantiles, with an SLO.
  const target = (objective: string) => (d.slo ? [{ expr: `max(${q.s('disagg_router_slo_target_seconds', `objective="${objective}"`)})`, legend: 'SLO' }] : []);
  panels.push({
    title: 'Time to first token',
    description: 'TTFT of streaming requests as clients see it (disagg_router_ttft_seconds)' + (d.slo ? ', and the SLO\'s target.' : '.'),
    unit: 's',
    targets: [...quantiles(q, 'disagg_router_ttft_seconds'), ...target('ttft')],
  }, {
    title: 'Time per output token',
    description: 'TPOT after the first token (disagg_router_tpot_seconds)' + (d.slo ? ', and the SLO\'s target.' : '.'),
    unit: 's',
    targets: [...quantiles(q, 'disagg_router_tpot_seconds'), ...target('tpot')],
  }, {
    title: 'End-to-end latency',
    description: 'From the request\'s arrival at the router to its last byte (disagg_router_e2e_seconds).',
    unit: 's',
    targets: quantiles(q, 'disagg_router_e2e_seconds'),
  }, {
    title: 'Router queue time',
    description: 'Time waiting for an admission slot in the router (disagg_router_queue_seconds).',
    unit: 's',
    targets: quantiles(q, 'disagg_router_queue_seconds'),
  }, {
    title: 'Errors by cause',
    description: 'Failed or degraded requests per second (disagg_router_errors_total).',
    unit: 'reqps',
    stacked: true,
    targets: [{ expr: `sum by (cause) (rate(${q.s('disagg_router_errors_total')}[${RI}]))`, legend: '{{cause}}' }],
  });
  return panels;
}

function phasePanels(q: DeploymentQueries): PanelSpec[] {
  const phases = (extra?: string) => `rate(${q.s('disagg_router_request_phase_seconds_sum', extra)}[${RI}])`;
  // Served requests: each observes its queue phase once (errors observe none, so they do not dilute the means).
  const requests = `sum(rate(${q.s('disagg_router_request_phase_seconds_count', 'phase="queue"')}[${RI}]))`;
  const mean = (metric: string) => `sum(rate(${q.s(`${metric}_sum`)}[${RI}])) / sum(rate(${q.s(`${metric}_count`)}[${RI}]))`;
  return [{
    title: 'Mean seconds per request, by phase',
    description: 'Each phase\'s seconds per served request (disagg_router_request_phase_seconds_sum / its queue phase\'s count): ' +
      'stacked, the phases add up to the mean end-to-end latency; queue + route + prefill + kv_transfer + first_token is the TTFT.',
    unit: 's',
    stacked: true,
    targets: [{ expr: `sum by (phase) (${phases()}) / on () group_left () ${requests}`, legend: '{{phase}}' }],
  }, {
    title: 'Measured latency against the sum of its phases',
    description: 'Mean E2E and TTFT as measured, and the phases that make them up: the lines should agree (TTFT counts streaming requests only).',
    unit: 's',
    targets: [
      { expr: mean('disagg_router_e2e_seconds'), legend: 'E2E measured' },
      { expr: `sum(${phases()}) / ${requests}`, legend: 'E2E: sum of phases' },
      { expr: mean('disagg_router_ttft_seconds'), legend: 'TTFT measured' },
      { expr: `sum(${phases('phase!="decode"')}) / ${requests}`, legend: 'TTFT: phases before the first token' },
    ],
  }, {
    title: 'Mean seconds per request, by path and phase',
    description: 'pd: prefilled on the prefill pool and moved over KV transfer; aggregated: prefilled on the decode pod itself.',
    unit: 's',
    targets: [{
      expr: `sum by (path, phase) (${phases()}) / on (path) group_left () sum by (path) (rate(${q.s('disagg_router_request_phase_seconds_count', 'phase="queue"')}[${RI}]))`,
      legend: '{{path}} {{phase}}',
    }],
  }, {
    title: 'p90 of each phase',
    description: 'disagg_router_request_phase_seconds by phase.',
    unit: 's',
    targets: [{ expr: `histogram_quantile(0.9, sum by (le, phase) (rate(${q.s('disagg_router_request_phase_seconds_bucket')}[${RI}])))`, legend: '{{phase}}' }],
  }, {
    title: 'Prefill/decode decisions',
    description: 'Why the router did or did not send a request through the prefill pool (disagg_router_pd_decisions_total).',
    unit: 'reqps',
    stacked: true,
    targets: [{ expr: `sum by (reason) (rate(${q.s('disagg_router_pd_decisions_total')}[${RI}]))`, legend: '{{reason}}' }],
  }, {
    title: 'Fallbacks',
    description: 'Prefill legs that failed and were prefilled on decode instead; decode legs retried decode-only after a failed KV pull.',
    unit: 'reqps',
    targets: [
      { expr: `sum(rate(${q.s('disagg_router_prefill_fallbacks_total')}[${RI}]))`, legend: 'prefill fallbacks' },
      { expr: `sum(rate(${q.s('disagg_router_kv_transfer_fallbacks_total')}[${RI}]))`, legend: 'KV transfer fallbacks' },
    ],
  }, {
    title: 'vLLM queue time by pool (p90)',
    description: 'vllm:request_queue_time_seconds: time a request waits in vLLM\'s scheduler.',
    unit: 's',
    targets: [{ expr: `histogram_quantile(0.9, sum by (le, pool) (rate(${q.s('vllm:request_queue_time_seconds_bucket')}[${RI}])))`, legend: '{{pool}}' }],
  }, {
    title: 'vLLM time to first token by pool (p90)',
    description: 'vllm:time_to_first_token_seconds inside each pool (a prefill leg\'s first token is its only one).',
    unit: 's',
    targets: [{ expr: `histogram_quantile(0.9, sum by (le, pool) (rate(${q.s('vllm:time_to_first_token_seconds_bucket')}[${RI}])))`, legend: '{{pool}}' }],
  }, {
    title: 'vLLM inter-token latency and E2E (p90)',
    description: 'vllm:inter_token_latency_seconds on the decode pool and vllm:e2e_request_latency_seconds per pool.',
    unit: 's',
    targets: [
      { expr: `histogram_quantile(0.9, sum by (le) (rate(${q.s('vllm:inter_token_latency_seconds_bucket', 'pool="decode"')}[${RI}])))`, legend: 'decode inter-token' },
      { expr: `histogram_quantile(0.9, sum by (le, pool) (rate(${q.s('vllm:e2e_request_latency_seconds_bucket')}[${RI}])))`, legend: '{{pool}} E2E' },
    ],
  }, {
    title: 'Running and waiting requests by pool',
    description: 'vllm:num_requests_running and vllm:num_requests_waiting summed over each pool\'s workers.',
    unit: 'short',
    targets: [
      { expr: `sum by (pool) (${q.s('vllm:num_requests_running')})`, legend: '{{pool}} running' },
      { expr: `sum by (pool) (${q.s('vllm:num_requests_waiting')})`, legend: '{{pool}} waiting' },
    ],
  }, {
    title: 'KV cache usage by pool',
    description: 'vllm:kv_cache_usage_perc, mean and max over each pool\'s workers.',
    unit: 'percentunit',
    max: 1,
    targets: [
      { expr: `avg by (pool) (${q.s('vllm:kv_cache_usage_perc')})`, legend: '{{pool}} mean' },
      { expr: `max by (pool) (${q.s('vllm:kv_cache_usage_perc')})`, legend: '{{pool}} max' },
    ],
  }, {
    title: 'Finished requests and preemptions by pool',
    description: 'vllm:request_success_total and vllm:num_preemptions_total (preemptions recompute a sequence: KV ran out).',
    unit: 'reqps',
    targets: [
      { expr: `sum by (pool) (rate(${q.s('vllm:request_success_total')}[${RI}]))`, legend: '{{pool}} finished' },
      { expr: `sum by (pool) (rate(${q.s('vllm:num_preemptions_total')}[${RI}]))`, legend: '{{pool}} preempted' },
    ],
  }];
}

function kvPanels(d: MonitoredDeployment, q: DeploymentQueries): PanelSpec[] {
  const pair = '{{prefill}} → {{decode}}';
  const byPod = (metric: string) => `sum by (pod) (rate(${q.s(metric)}[${RI}]))`;
  return [{
    title: 'Effective KV rate per pair',
    description: 'Bytes moved over seconds spent moving them (disagg_router_kv_transfer_bytes_total / disagg_router_kv_transfer_seconds_sum)' +
      (d.nixlBackend === 'LIBFABRIC' ? '; under the line (10 Gbit/s) for 15 minutes, a pair fires DisaggKvTransferOnTcp.' : '.'),
    unit: 'Bps',
    lines: d.nixlBackend === 'LIBFABRIC' ? [TCP_RATE_FLOOR_BYTES_PER_SECOND] : undefined,
    targets: [{ expr: q.kvRatePerPair(RI), legend: pair }],
  }, {
    title: 'KV bytes per second per pair',
    description: 'disagg_router_kv_transfer_bytes_total.',
    unit: 'Bps',
    stacked: true,
    targets: [{ expr: `sum by (prefill, decode) (rate(${q.s('disagg_router_kv_transfer_bytes_total')}[${RI}]))`, legend: pair }],
  }, {
    title: 'KV transfer time per pair (p50, p99)',
    description: 'disagg_router_kv_transfer_seconds: from the decode leg\'s start to its KV pull\'s end, per endpoint pair.',
    unit: 's',
    targets: [0.5, 0.99].map(p => ({
      expr: `histogram_quantile(${p}, sum by (le, prefill, decode) (rate(${q.s('disagg_router_kv_transfer_seconds_bucket')}[${RI}])))`,
      legend: `p${Math.round(p * 100)} ${pair}`,
    })),
  }, {
    title: 'KV transfers per second per pair',
    description: 'disagg_router_kv_transfer_seconds_count.',
    unit: 'ops',
    stacked: true,
    targets: [{ expr: `sum by (prefill, decode) (rate(${q.s('disagg_router_kv_transfer_seconds_count')}[${RI}]))`, legend: pair }],
  }, {
    title: 'KV transport in use',
    description: 'disagg_router_kv_transport_info: the NIXL backend (LIBFABRIC or UCX) and provider (efa or tcp) each pool is configured with.',
    unit: 'short',
    table: true,
    targets: [{ expr: `max by (pool, backend, provider) (${q.s('disagg_router_kv_transport_info')})`, legend: '{{pool}} {{backend}} {{provider}}' }],
  }, {
    title: 'NIXL transfer and post time by pod (p99)',
    description: 'vllm:nixl_xfer_time_seconds and vllm:nixl_post_time_seconds on the pods that pull KV (decode).',
    unit: 's',
    targets: [
      { expr: `histogram_quantile(0.99, sum by (le, pod) (rate(${q.s('vllm:nixl_xfer_time_seconds_bucket')}[${RI}])))`, legend: '{{pod}} transfer' },
      { expr: `histogram_quantile(0.99, sum by (le, pod) (rate(${q.s('vllm:nixl_post_time_seconds_bucket')}[${RI}])))`, legend: '{{pod}} post' },
    ],
  }, {
    title: 'NIXL rate by pod (vLLM\'s view)',
    description: 'vllm:nixl_bytes_transferred_sum / vllm:nixl_xfer_time_seconds_sum: the rate vLLM measures, next to the router\'s per pair.',
    unit: 'Bps',
    targets: [{ expr: `${byPod('vllm:nixl_bytes_transferred_sum')} / ${byPod('vllm:nixl_xfer_time_seconds_sum')}`, legend: '{{pod}}' }],
  }, {
    title: 'NIXL bytes and descriptors per transfer (mean)',
    description: 'vllm:nixl_bytes_transferred and vllm:nixl_num_descriptors per transfer: many small descriptors move slowly.',
    unit: 'bytes',
    targets: [
      { expr: `${byPod('vllm:nixl_bytes_transferred_sum')} / ${byPod('vllm:nixl_bytes_transferred_count')}`, legend: '{{pod}} bytes' },
      { expr: `${byPod('vllm:nixl_num_descriptors_sum')} / ${byPod('vllm:nixl_num_descriptors_count')}`, legend: '{{pod}} descriptors' },
    ],
  }, {
    title: 'KV transfer failures',
    description: 'vllm:nixl_num_failed_transfers_total, vllm:nixl_num_failed_notifications_total and vllm:nixl_num_kv_expired_reqs_total by pod, ' +
      'and the router\'s decode-only retries (disagg_router_kv_transfer_fallbacks_total); DisaggKvTransferFailing fires on them.',
    unit: 'ops',
    targets: [
      { expr: byPod('vllm:nixl_num_failed_transfers_total'), legend: '{{pod}} failed transfers' },
      { expr: byPod('vllm:nixl_num_failed_notifications_total'), legend: '{{pod}} failed notifications' },
      { expr: byPod('vllm:nixl_num_kv_expired_reqs_total'), legend: '{{pod}} expired KV' },
      { expr: `sum(rate(${q.s('disagg_router_kv_transfer_fallbacks_total')}[${RI}]))`, legend: 'router fallbacks' },
    ],
  }];
}

function prefixPanels(q: DeploymentQueries): PanelSpec[] {
  const prompt = `sum by (pool) (rate(${q.s('disagg_router_endpoint_prompt_tokens_total')}[${RI}]))`;
  return [{
    title: 'Prefix hit rate per pool: predicted vs real',
    description: 'Predicted: prompt tokens the router found cached where it routed / prompt tokens routed. Real: vllm:prefix_cache_hits_total / ' +
      'vllm:prefix_cache_queries_total as the workers report them.',
    unit: 'percentunit',
    max: 1,
    targets: [
      { expr: `${q.predictedHitTokenRate(RI)} / ${prompt}`, legend: '{{pool}} predicted' },
      {
        expr: `sum by (pool) (rate(${q.s('vllm:prefix_cache_hits_total')}[${RI}])) / sum by (pool) (rate(${q.s('vllm:prefix_cache_queries_total')}[${RI}]))`,
        legend: '{{pool}} real',
      },
    ],
  }, {
    title: 'Real / predicted hit tokens per pool',
    description: `Under the line (${num(PREFIX_REAL_OVER_PREDICTED_FLOOR)}) for 30 minutes, DisaggPrefixHitsBelowPrediction fires.`,
    unit: 'percentunit',
    lines: [PREFIX_REAL_OVER_PREDICTED_FLOOR],
    targets: [{ expr: `${q.realHitTokenRate(RI)} / ${q.predictedHitTokenRate(RI)}`, legend: '{{pool}}' }],
  }, {
    title: 'Prefix hit tokens per second per pool',
    description: 'disagg_router_endpoint_predicted_prefix_hit_tokens_total against disagg_router_endpoint_worker_prefix_cache_hits_total.',
    unit: 'short',
    targets: [
      { expr: q.predictedHitTokenRate(RI), legend: '{{pool}} predicted' },
      { expr: q.realHitTokenRate(RI), legend: '{{pool}} real' },
    ],
  }, {
    title: 'Real / predicted hit tokens per endpoint',
    description: 'An endpoint far under 1 lost KV events or restarted cold; far over 1 serves hits the router did not know of.',
    unit: 'percentunit',
    targets: [{
      expr: `max by (endpoint) (rate(${q.s('disagg_router_endpoint_worker_prefix_cache_hits_total')}[${RI}]))` +
        ` / sum by (endpoint) (rate(${q.s('disagg_router_endpoint_predicted_prefix_hit_tokens_total')}[${RI}]))`,
      legend: '{{endpoint}}',
    }],
  }, {
    title: 'Router block hit rate',
    description: 'Full prompt blocks the router found in its index where it routed (disagg_router_prefix_hit_blocks_total / _query_blocks_total).',
    unit: 'percentunit',
    max: 1,
    targets: [{
      expr: `sum(rate(${q.s('disagg_router_prefix_hit_blocks_total')}[${RI}])) / sum(rate(${q.s('disagg_router_prefix_query_blocks_total')}[${RI}]))`,
      legend: 'blocks hit',
    }],
  }, {
    title: 'Prompt tokens per second per pool',
    description: 'Routed by the router (disagg_router_endpoint_prompt_tokens_total) and processed by vLLM (vllm:prompt_tokens_total).',
    unit: 'short',
    targets: [
      { expr: prompt, legend: '{{pool}} routed' },
      { expr: `sum by (pool) (rate(${q.s('vllm:prompt_tokens_total')}[${RI}]))`, legend: '{{pool}} vLLM' },
    ],
  }];
}

function autoscalerPanels(d: MonitoredDeployment, q: DeploymentQueries): PanelSpec[] {
  const scaled = POOL_NAMES.filter(p => d.pools[p].autoscaling !== undefined);
  const panels: PanelSpec[] = [{
    title: 'SLO pressure by pool',
    description: 'disagg_router_pool_slo_pressure: predicted latency / SLO, or capacity in use; 1 is the SLO. ' +
      (scaled.length > 0 ? `Targets: ${scaled.map(p => `${p} ${num(d.pools[p].autoscaling!.targetPressure)}`).join(', ')}.` : 'No pool is autoscaled.'),
    unit: 'short',
    lines: [1],
    targets: [{ expr: `max by (pool) (${q.s('disagg_router_pool_slo_pressure')})`, legend: '{{pool}}' }],
  }, {
    title: 'Ready endpoints by pool',
    description: 'disagg_router_pool_ready_endpoints' + (scaled.length > 0 ? ', with each autoscaled pool\'s ceiling (maxReplicas x endpoints per replica).' : '.'),
    unit: 'short',
    targets: [
      { expr: `max by (pool) (${q.s('disagg_router_pool_ready_endpoints')})`, legend: '{{pool}}' },
      ...scaled.map(p => ({ expr: `vector(${d.pools[p].autoscaling!.maxEndpoints})`, legend: `${p} ceiling` })),
    ],
  }];
  if (scaled.length > 0) {
    const hpa = `horizontalpodautoscaler=~"${scaled.map(p => d.pools[p].autoscaling!.hpaName).join('|')}"`;
    const ksm = (metric: string) => `${metric}{${d.namespace ? `namespace="${d.namespace}",` : ''}${hpa}}`;
    panels.push({
      title: 'Replicas: current, desired and maximum',
      description: 'The HPAs as kube-state-metrics reports them (kube_horizontalpodautoscaler_*): desired above current is a scale-up in progress.',
      unit: 'short',
      targets: [
        { expr: ksm('kube_horizontalpodautoscaler_status_current_replicas'), legend: '{{horizontalpodautoscaler}} current' },
        { expr: ksm('kube_horizontalpodautoscaler_status_desired_replicas'), legend: '{{horizontalpodautoscaler}} desired' },
        { expr: ksm('kube_horizontalpodautoscaler_spec_max_replicas'), legend: '{{horizontalpodautoscaler}} max' },
      ],
    });
  }
  panels.push({
    title: 'Queued requests by pool',
    description: 'disagg_router_pool_queued_requests: held for lack of a ready endpoint (a pool coming back from zero).',
    unit: 'short',
    targets: [{ expr: `max by (pool) (${q.s('disagg_router_pool_queued_requests')})`, legend: '{{pool}}' }],
  }, {
    title: 'Predicted TTFT (prefill)',
    description: 'disagg_router_pool_predicted_ttft_seconds' + (d.slo ? `; the line is the SLO (${num(d.slo.ttftSeconds)} s).` : '.'),
    unit: 's',
    lines: d.slo ? [d.slo.ttftSeconds] : undefined,
    targets: [{ expr: `max(${q.s('disagg_router_pool_predicted_ttft_seconds', 'pool="prefill"')})`, legend: 'prefill' }],
  }, {
    title: 'Predicted TPOT (decode)',
    description: 'disagg_router_pool_predicted_tpot_seconds' + (d.slo ? `; the line is the SLO (${num(d.slo.tpotSeconds)} s).` : '.'),
    unit: 's',
    lines: d.slo ? [d.slo.tpotSeconds] : undefined,
    targets: [{ expr: `max(${q.s('disagg_router_pool_predicted_tpot_seconds', 'pool="decode"')})`, legend: 'decode' }],
  }, {
    title: 'KV utilization by pool',
    description: 'disagg_router_pool_kv_utilization: vllm:kv_cache_usage_perc averaged over the pool\'s ready endpoints.',
    unit: 'percentunit',
    max: 1,
    targets: [{ expr: `max by (pool) (${q.s('disagg_router_pool_kv_utilization')})`, legend: '{{pool}}' }],
  });
  return panels;
}

function costPanels(d: MonitoredDeployment, q: DeploymentQueries, price: number): PanelSpec[] {
  const instances = q.instances(d.pools);
  const perHour = `(${instances}) * ${num(price)}`;
  const output = `sum(rate(${q.s('vllm:generation_tokens_total', 'pool="decode"')}[${RI}]))`;
  const prompt = `sum(rate(${q.s('vllm:prompt_tokens_total', 'pool="decode"')}[${RI}]))`;
  return [{
    title: 'Instances in use by pool',
    description: 'Scraped vLLM endpoints (up, ready or not) times the instances each stands for: '
      + POOL_NAMES.map(p => `${p} ${num(d.pools[p].instancesPerEndpoint)}`).join(', ') + '.',
    unit: 'short',
    stacked: true,
    targets: POOL_NAMES.map(p => ({ expr: `count(${q.s('up', `pool="${p}"`)}) * ${num(d.pools[p].instancesPerEndpoint)}`, legend: p })),
  }, {
    title: 'Cost per hour',
    description: `Instances x $${num(price)} per instance-hour (instancePricePerHour).`,
    unit: 'currencyUSD',
    targets: [{ expr: perHour, legend: 'USD per hour' }],
  }, {
    title: 'Cost per million output tokens',
    description: 'Cost per second over the output tokens per second the decode pool generates (vllm:generation_tokens_total).',
    unit: 'currencyUSD',
    targets: [{ expr: `${perHour} / 3600 / ${output} * 1e6`, legend: 'USD per million output tokens' }],
  }, {
    title: 'Cost per million tokens, prompt and output',
    description: 'Cost per second over prompt (vllm:prompt_tokens_total) and output tokens per second of the decode pool, which sees every request.',
    unit: 'currencyUSD',
    targets: [{ expr: `${perHour} / 3600 / (${output} + ${prompt}) * 1e6`, legend: 'USD per million tokens' }],
  }, {
    title: 'Tokens per second',
    description: 'Output and prompt tokens per second of the decode pool.',
    unit: 'short',
    targets: [{ expr: output, legend: 'output' }, { expr: prompt, legend: 'prompt' }],
  }];
}
