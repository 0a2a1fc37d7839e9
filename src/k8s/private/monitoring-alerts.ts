import {
  DeploymentQueries, EJECTIONS_IN_30M, HERDING_FACTOR, HERDING_MIN_REQUESTS_PER_SECOND, MonitoredDeployment, POOL_NAMES,
  PREFIX_MIN_PREDICTED_TOKENS_PER_SECOND, PREFIX_REAL_OVER_PREDICTED_FLOOR, TCP_MIN_TRANSFERS, TCP_RATE_FLOOR_BYTES_PER_SECOND, burnRatePairs, num,
} from './monitoring-queries';

/** The runbooks: a section of docs/monitoring.md per alert, named after it. */
export const RUNBOOK_BASE_URL = 'https://github.com/disagg/disagg/blob/main/docs/monitoring.md';

/** One alerting rule as a PrometheusRule (and a Prometheus rules file) holds it (internal). */
export interface AlertRule {
  readonly alert: string;
  readonly expr: string;
  readonly for?: string;
  readonly labels: Record<string, string>;
  readonly annotations: Record<string, string>;
}

/** A rule group (internal). */
export interface AlertGroup {
  readonly name: string;
  readonly rules: AlertRule[];
}

/**
 * The deployment's alerts, one group `disagg-<name>`. Every expression keeps to the deployment's series
 * (`deployment`, and `namespace` when it has one). SLO burn rates only with an SLO; the TCP fallback only
 * when KV should move over EFA (LIBFABRIC); the autoscaler's ceiling only for autoscaled pools.
 */
export function alertGroup(d: MonitoredDeployment): AlertGroup {
  const q = new DeploymentQueries(d);
  const where = d.namespace ? `${d.namespace}/${d.name}` : d.name;
  const rule = (alert: string, expr: string, forDuration: string | undefined, severity: string, extraLabels: Record<string, string>,
    summary: string, description: string): AlertRule => ({
    alert,
    expr,
    ...(forDuration ? { for: forDuration } : {}),
    labels: { severity, ...extraLabels },
    annotations: { summary, description, runbook_url: `${RUNBOOK_BASE_URL}#${alert.toLowerCase()}` },
  });
  const rules: AlertRule[] = [];

  if (d.slo) {
    const budget = 1 - d.slo.targetShare;
    for (const p of burnRatePairs(budget).fire) {
      const threshold = num(p.factor * budget);
      rules.push(rule('DisaggSloBudgetBurn',
        `(${q.sloMissRatio(p.long)}) > ${threshold}\nand\n(${q.sloMissRatio(p.short)}) > ${threshold}`,
        p.for, p.severity, { long_window: p.long, short_window: p.short, burn_rate: num(p.factor) },
        `${where}: the {{ $labels.objective }} SLO burns its error budget ${num(p.factor)}x too fast`,
        `{{ $value | humanizePercentage }} of requests missed the {{ $labels.objective }} target over the last ${p.short} ` +
        `(and over ${p.long}), against a budget of ${num(budget * 100)}% (targetShare ${num(d.slo.targetShare)}): ` +
        `at this rate a 30-day budget is gone in ${num(30 / p.factor)} days.`));
    }
  }

  const failures = [
    ['vllm:nixl_num_failed_transfers_total', 'nixl_failed_transfers'],
    ['vllm:nixl_num_failed_notifications_total', 'nixl_failed_notifications'],
    ['disagg_router_kv_transfer_fallbacks_total', 'router_kv_transfer_fallbacks'],
  ].map(([metric, source]) => `label_replace(sum(increase(${q.s(metric)}[5m])), "source", "${source}", "", "")`);
  rules.push(rule('DisaggKvTransferFailing', `(\n  ${failures.join('\n  or ')}\n) > 0`, '10m', 'ticket', {},
    `${where}: KV cache transfers from prefill to decode keep failing`,
    '{{ $value | humanize }} {{ $labels.source }} in the last 5 minutes, in every 5 minutes for 10 minutes: decode pods cannot pull ' +
    'prompts\' KV blocks, and each failed request is retried decode-only (kv_load_failure_policy fail) or recomputed.'));

  if (d.nixlBackend === 'LIBFABRIC') {
    rules.push(rule('DisaggKvTransferOnTcp',
      `(${q.kvRatePerPair('15m')}) < ${num(TCP_RATE_FLOOR_BYTES_PER_SECOND)}\n` +
      `and sum by (prefill, decode) (increase(${q.s('disagg_router_kv_transfer_seconds_count')}[15m])) >= ${TCP_MIN_TRANSFERS}`,
      '5m', 'ticket', {},
      `${where}: KV moves from {{ $labels.prefill }} to {{ $labels.decode }} at TCP speed, not EFA's`,
      'The pair\'s effective KV rate is {{ $value | humanize1024 }}B/s over 15 minutes, below the 10 Gbit/s that EFA never falls ' +
      'under: NIXL\'s LIBFABRIC backend is likely on the tcp provider (no EFA device in the pod) or the transfers are stalling.'));
  }

  rules.push(rule('DisaggPrefixHitsBelowPrediction',
    `(${q.realHitTokenRate('30m')} / ${q.predictedHitTokenRate('30m')}) < ${num(PREFIX_REAL_OVER_PREDICTED_FLOOR)}\n` +
    `and ${q.predictedHitTokenRate('30m')} > ${num(PREFIX_MIN_PREDICTED_TOKENS_PER_SECOND)}`,
    '10m', 'warning', {},
    `${where}: the {{ $labels.pool }} pool's prefix cache hits far less than the router predicts`,
    'Workers report {{ $value | humanizePercentage }} of the prefix-cache hit tokens the routers expected over 30 minutes: the ' +
    'router routes on a stale or wrong KV index (lost KV events, another tokenizer or block size), so prompts are recomputed.'));

  const rate = q.endpointRequestRate('5m');
  rules.push(rule('DisaggEndpointHerding',
    // The mean of the pool's other endpoints: against the pool's own mean, one of two endpoints could never reach 2x.
    `${rate}\n> ${num(HERDING_FACTOR)} * (\n` +
    `  (sum by (pool) (${rate}) - on (pool) group_right () ${rate})\n  / on (pool) group_left () (count by (pool) (${rate}) - 1)\n)\n` +
    `and on (pool) count by (pool) (${rate}) >= 2\nand ${rate} > ${num(HERDING_MIN_REQUESTS_PER_SECOND)}`,
    '15m', 'warning', {},
    `${where}: endpoint {{ $labels.endpoint }} takes far more than its share of the {{ $labels.pool }} pool's requests`,
    '{{ $labels.endpoint }} gets {{ $value | humanize }} requests/s, more than twice the mean of the pool\'s other endpoints, for ' +
    '15 minutes: the router keeps choosing it (one hot prefix, or the others look loaded or unhealthy to it).'));

  for (const pool of POOL_NAMES) {
    const a = d.pools[pool].autoscaling;
    if (a === undefined) continue;
    rules.push(rule('DisaggAutoscalerAtMax',
      `max by (pool) (${q.s('disagg_router_pool_ready_endpoints', `pool="${pool}"`)}) >= ${a.maxEndpoints}\n` +
      `and max by (pool) (${q.s('disagg_router_pool_slo_pressure', `pool="${pool}"`)}) > 1`,
      '30m', 'ticket', {},
      `${where}: the ${pool} pool is at its ${a.maxReplicas} replicas and still over its SLO`,
      `The ${pool} pool has had its maximum (${a.maxEndpoints} endpoints, ${a.maxReplicas} replicas) for 30 minutes and its SLO ` +
      'pressure stays above 1: the autoscaler can add nothing, so latency exceeds the SLO until load falls or maxReplicas rises.'));
  }

  rules.push(rule('DisaggWorkerFailingHealth',
    `max by (endpoint, pool, role) (increase(${q.s('disagg_router_endpoint_ejections_total')}[30m])) >= ${EJECTIONS_IN_30M}\n` +
    `or max by (endpoint, pool, role) (max_over_time(${q.s('disagg_router_endpoint_healthy')}[10m])) == 0`,
    undefined, 'ticket', {},
    `${where}: worker {{ $labels.endpoint }} ({{ $labels.pool }}) keeps failing its health checks`,
    'The routers ejected {{ $labels.endpoint }} at least 3 times in 30 minutes, or none has seen it healthy for 10 minutes ' +
    '(value {{ $value }}: ejections, or 0 when unhealthy): its requests go elsewhere and the pool runs short.'));

  return { name: `disagg-${d.name}`, rules };
}
