import { Duration } from 'cdk8s';

/**
 * Options of {@link Monitoring.prometheusOperator}.
 */
export interface PrometheusOperatorMonitoringOptions {
  /**
   * How often Prometheus scrapes the router, the workers and the kvstore: a whole number of seconds from
   * 1 to 60 (the alerts' shortest window, 5 minutes, must hold several scrapes).
   * @default Duration.seconds(15)
   * @see https://prometheus-operator.dev/docs/api-reference/api/#monitoring.coreos.com/v1.PodMetricsEndpoint
   */
  readonly scrapeInterval?: Duration;
  /**
   * Labels added to every monitoring object (the PodMonitor, ServiceMonitors, PrometheusRule and dashboard
   * ConfigMaps), for the selectors of the Prometheus that should load them. kube-prometheus-stack's
   * Prometheus selects only objects labelled `release: <its Helm release name>` by default
   * (`release: kube-prometheus-stack` for a release of that name) unless its
   * `prometheus.prometheusSpec.*SelectorNilUsesHelmValues` values are false.
   * @default - none
   * @see https://github.com/prometheus-community/helm-charts/tree/main/charts/kube-prometheus-stack
   */
  readonly labels?: { [key: string]: string };
  /**
   * Emit a PrometheusRule `<name>` with the deployment's alerts (SLO burn rate, KV transfer failures,
   * KV over TCP on EFA, prefix hits below the router's prediction, a herding endpoint, an autoscaler
   * at its maximum, a worker failing health), each with a runbook in docs/monitoring.md.
   * @default true
   */
  readonly alerts?: boolean;
  /**
   * Emit the Grafana dashboards as ConfigMaps `<name>-dashboard-<slug>` labelled `grafana_dashboard: "1"`,
   * the label the Grafana Helm chart's dashboard sidecar loads by default (`sidecar.dashboards.label`;
   * kube-prometheus-stack enables the sidecar). The same JSON is on the construct (`dashboards`).
   * @default true
   * @see https://github.com/grafana/helm-charts/tree/main/charts/grafana#sidecar-for-dashboards
   */
  readonly dashboards?: boolean;
  /**
   * Price of one instance-hour of the pools' instance type, in US dollars (e.g. its on-demand or
   * Capacity Block price), for the dashboard of cost per million tokens. One price for every instance of
   * the deployment: when prefill and decode run on different types, give the mean price of the instances.
   * @default - none: the cost dashboard is left out
   */
  readonly instancePricePerHour?: number;
}

/**
 * What the workload constructs emit for monitoring. A union-like class.
 *
 * `none()` emits nothing. `prometheusOperator(...)` emits prometheus-operator objects
 * (`monitoring.coreos.com/v1`): from a `DisaggregatedInference`, a PodMonitor `<name>-workers` on every vLLM
 * API port of the prefill and decode pods and a ServiceMonitor `<name>-router` on the router's Service
 * (both label every series `deployment=<name>`, the workers' also `pool=prefill|decode`), a PrometheusRule
 * `<name>` with the deployment's alerts and Grafana dashboards as ConfigMaps; from a `TieredKvCache`, a
 * ServiceMonitor on the kvstore's `metrics` port. docs/monitoring.md lists the metrics, the alerts and
 * their runbooks.
 *
 * @see https://prometheus-operator.dev/docs/developer/getting-started/
 */
export class Monitoring {
  /** No monitoring objects. */
  public static none(): Monitoring {
    return new Monitoring('none', undefined);
  }

  /** PodMonitor, ServiceMonitors, PrometheusRule and Grafana dashboards for a prometheus-operator Prometheus. */
  public static prometheusOperator(options: PrometheusOperatorMonitoringOptions = {}): Monitoring {
    const where = 'Monitoring.prometheusOperator';
    const interval = options.scrapeInterval ?? Duration.seconds(15);
    const ms = interval.toMilliseconds();
    if (!(Number.isInteger(ms / 1000) && ms >= 1000 && ms <= 60_000)) {
      throw new Error(`${where}: 'scrapeInterval' (${interval.toHumanString()}) must be a whole number of seconds from 1 to 60 ` +
        '(the alerts\' 5-minute windows need several scrapes); e.g. Duration.seconds(15)');
    }
    for (const [key, value] of Object.entries(options.labels ?? {})) {
      if (!LABEL_KEY.test(key) || !LABEL_VALUE.test(value)) {
        throw new Error(`${where}: 'labels' ('${key}': '${value}') is not a Kubernetes label: keys are an optional DNS prefix and '/' ` +
          "then up to 63 letters, digits, '-', '_' or '.', values up to 63 of those (e.g. release: 'kube-prometheus-stack')");
      }
    }
    const price = options.instancePricePerHour;
    if (price !== undefined && !(Number.isFinite(price) && price > 0)) {
      throw new Error(`${where}: 'instancePricePerHour' (${price}) must be a positive number of US dollars per instance-hour ` +
        "(e.g. the instance type's on-demand price); leave it out to omit the cost dashboard");
    }
    return new Monitoring('prometheus-operator', {
      scrapeInterval: interval,
      labels: { ...options.labels },
      alerts: options.alerts ?? true,
      dashboards: options.dashboards ?? true,
      instancePricePerHour: price,
    });
  }

  /** 'none' or 'prometheus-operator'. */
  public readonly kind: string;
  /**
   * The prometheus-operator options with their defaults applied.
   * @default - none for `Monitoring.none()`
   */
  public readonly prometheusOperatorOptions?: PrometheusOperatorMonitoringOptions;

  private constructor(kind: string, prometheusOperatorOptions: PrometheusOperatorMonitoringOptions | undefined) {
    this.kind = kind;
    this.prometheusOperatorOptions = prometheusOperatorOptions;
  }
}

/** A Kubernetes label key (optional DNS subdomain prefix) and value. */
const LABEL_KEY = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$/;
