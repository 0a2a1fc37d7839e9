/**
 * The PromQL a deployment's alerts and dashboards share (internal): one home for each measure, so that
 * a panel shows what its alert fires on. Metric names are the router's (`disagg_router_*`,
 * engine/src/servers/router), vLLM's (`vllm:*`) and kube-state-metrics'; docs/monitoring.md lists them.
 */

/** What a deployment's monitoring is built from (internal). */
export interface MonitoredDeployment {
  /** The deployment's name: the `deployment` label the PodMonitor and ServiceMonitor put on every series. */
  readonly name: string;
  /** @default - no namespace matcher (a chart without a namespace) */
  readonly namespace?: string;
  /** The deployment's SLO, with `targetShare` resolved. */
  readonly slo?: { readonly ttftSeconds: number; readonly tpotSeconds: number; readonly targetShare: number };
  /** 'LIBFABRIC' (EFA) or 'UCX'. */
  readonly nixlBackend: string;
  readonly pools: Record<PoolName, MonitoredPool>;
  /**
   * Price of an instance-hour, USD.
   * @default - no cost dashboard
   */
  readonly instancePricePerHour?: number;
}

export type PoolName = 'prefill' | 'decode';
export const POOL_NAMES: PoolName[] = ['prefill', 'decode'];

/** One pool as monitoring sees it (internal). */
export interface MonitoredPool {
  /** Instances one endpoint (a router endpoint, a scraped vLLM port) stands for: 0.5 for a TP4 pod on an 8-GPU node. */
  readonly instancesPerEndpoint: number;
  /**
   * The pool's autoscaling: its ceiling in router endpoints (maxReplicas x endpoints per replica), its
   * target pressure, and the name of the HPA that scales it (KEDA's is `keda-hpa-<ScaledObject>`).
   * @default - not autoscaled
   */
  readonly autoscaling?: { readonly maxEndpoints: number; readonly maxReplicas: number; readonly targetPressure: number; readonly hpaName: string };
}

/**
 * Effective KV rate floor, bytes/s, under which a pair that should move KV over EFA is taken to be on
 * TCP: 10 Gbit/s, about one TCP flow on ENA (EC2 caps a single flow at 5 Gbit/s, 10 within a cluster
 * placement group), while one EFA device carries 100 Gbit/s or more.
 * https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-instance-network-bandwidth.html
 */
export const TCP_RATE_FLOOR_BYTES_PER_SECOND = 1.25e9;
/** KV transfers a pair must make in 15 minutes for its rate to count (idle pairs never fire). */
export const TCP_MIN_TRANSFERS = 20;
/** Real / predicted prefix hit tokens under which the router's index is taken to be wrong. */
export const PREFIX_REAL_OVER_PREDICTED_FLOOR = 0.5;
/** Predicted prefix hit tokens per second of a pool below which the ratio is noise. */
export const PREFIX_MIN_PREDICTED_TOKENS_PER_SECOND = 100;
/** An endpoint herds when it gets more than this times the mean request rate of its pool's other endpoints. */
export const HERDING_FACTOR = 2;
/** Requests per second an endpoint must get to herd. */
export const HERDING_MIN_REQUESTS_PER_SECOND = 0.5;
/** Ejections in 30 minutes that mark a worker as failing health. */
export const EJECTIONS_IN_30M = 3;

/**
 * The multi-window, multi-burn-rate pairs of the Google SRE workbook ("Alerting on SLOs", table 5-8):
 * page on 2% of a 30-day budget spent in 1 hour or 5% in 6 hours, ticket on 10% in 3 days (and 1 day);
 * each pair's short window (1/12 of the long one) makes the alert stop soon after the burn does. `for`
 * as the Kubernetes mixin's burn-rate alerts.
 * https://sre.google/workbook/alerting-on-slos/#6-multiwindow-multi-burn-rate-alerts
 */
export const BURN_RATE_PAIRS = [
  { severity: 'page', factor: 14.4, long: '1h', short: '5m', for: '2m' },
  { severity: 'page', factor: 6, long: '6h', short: '30m', for: '15m' },
  { severity: 'ticket', factor: 3, long: '1d', short: '2h', for: '1h' },
  { severity: 'ticket', factor: 1, long: '3d', short: '6h', for: '3h' },
];

/** The pairs that can fire for an error budget: a pair whose threshold (factor x budget) is 1 or more never can. */
export function burnRatePairs(budget: number): { fire: typeof BURN_RATE_PAIRS; never: typeof BURN_RATE_PAIRS } {
  return {
    fire: BURN_RATE_PAIRS.filter(p => p.factor * budget < 1),
    never: BURN_RATE_PAIRS.filter(p => p.factor * budget >= 1),
  };
}

/** A number as PromQL writes it, without float noise (14.4 x 0.01 = 0.144, not 0.14400000000000002). */
export function num(x: number): string {
  return String(Number(x.toPrecision(6)));
}

/** PromQL over one deployment's series. */
export class DeploymentQueries {
  private readonly matchers: string;

  constructor(d: Pick<MonitoredDeployment, 'name' | 'namespace'>) {
    this.matchers = `deployment="${d.name}"${d.namespace ? `,namespace="${d.namespace}"` : ''}`;
  }

  /** `metric{deployment=...,namespace=...,extra}`. */
  public s(metric: string, extra?: string): string {
    return `${metric}{${this.matchers}${extra ? `,${extra}` : ''}}`;
  }

  /** Share of SLO-counted requests that missed, per objective (ttft, tpot), over `w`. */
  public sloMissRatio(w: string): string {
    return `sum by (objective) (rate(${this.s('disagg_router_slo_requests_total', 'result="missed"')}[${w}]))`
      + ` / sum by (objective) (rate(${this.s('disagg_router_slo_requests_total')}[${w}]))`;
  }

  /** Effective KV rate per (prefill, decode) endpoint pair, bytes/s: bytes moved over seconds spent moving them. */
  public kvRatePerPair(w: string): string {
    return `sum by (prefill, decode) (rate(${this.s('disagg_router_kv_transfer_bytes_total')}[${w}]))`
      + ` / sum by (prefill, decode) (rate(${this.s('disagg_router_kv_transfer_seconds_sum')}[${w}]))`;
  }

  /**
   * Prefix-cache hit tokens per second each pool's workers report. Every router replica reports each
   * worker's counter as it scraped it, so the replicas are reduced to one per endpoint first.
   */
  public realHitTokenRate(w: string): string {
    return `sum by (pool) (max by (pool, endpoint) (rate(${this.s('disagg_router_endpoint_worker_prefix_cache_hits_total')}[${w}])))`;
  }

  /** Prefix hit tokens per second the routers predicted per pool (each replica counts the legs it routed). */
  public predictedHitTokenRate(w: string): string {
    return `sum by (pool) (rate(${this.s('disagg_router_endpoint_predicted_prefix_hit_tokens_total')}[${w}]))`;
  }

  /** Requests per second routed to each endpoint, all router replicas together. */
  public endpointRequestRate(w: string): string {
    return `sum by (pool, endpoint) (rate(${this.s('disagg_router_endpoint_requests_total')}[${w}]))`;
  }

  /**
   * Instances the pools occupy: scraped vLLM endpoints (every target of the PodMonitor, up or not: a
   * loading pod costs too) times the instances each stands for.
   */
  public instances(pools: Record<PoolName, MonitoredPool>): string {
    return POOL_NAMES.map(p => `(count(${this.s('up', `pool="${p}"`)}) * ${num(pools[p].instancesPerEndpoint)} or vector(0))`).join(' + ');
  }
}
