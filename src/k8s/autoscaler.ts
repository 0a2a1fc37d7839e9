/**
 * What turns a pool's SLO pressure (the router's `disagg_router_pool_slo_pressure`, predicted latency /
 * SLO) into replicas. An enum-like class.
 *
 * Both run the Kubernetes HPA algorithm: `desired = ceil(current x pressure / targetPressure)`, with
 * the pool's stabilization windows.
 */
export class Autoscaler {
  /**
   * A KEDA `ScaledObject` per pool with a `metrics-api` trigger on the router's `GET /scaling` JSON
   * (no Prometheus needed). KEDA must run in the cluster (`InferenceCluster` installs it, pinned, as
   * `addons.keda`). The only kind that scales a pool to zero and back (KEDA's activation).
   * @see https://keda.sh/docs/2.20/scalers/metrics-api/
   */
  public static readonly KEDA = new Autoscaler('keda');

  /**
   * A plain `autoscaling/v2` HorizontalPodAutoscaler per pool on the external metric
   * `disagg_router_pool_slo_pressure` with selector `pool=<prefill|decode>, service=<router Service>`,
   * for clusters without KEDA. Needs the router's `/metrics` scraped through its Service (a
   * prometheus-operator ServiceMonitor, which labels the series with `namespace` and `service`: the
   * deployment's `monitoring: Monitoring.prometheusOperator()` emits one) and an
   * external-metrics adapter that serves them (e.g. prometheus-adapter, not installed by this library)
   * with a namespaced external rule that keeps `service` and `pool` and one series per router Service:
   * `seriesQuery: 'disagg_router_pool_slo_pressure{namespace!="",service!="",pool!=""}'`,
   * `resources: { overrides: { namespace: { resource: namespace } } }`,
   * `metricsQuery: 'max(<<.Series>>{<<.LabelMatchers>>}) by (namespace, service, pool)'` (an HPA sums
   * the series it gets, so several router replicas must be reduced to one). The `service` label keeps
   * two deployments in one namespace apart; the namespace keeps those of different namespaces apart.
   * Cannot scale to zero (the HPAScaleToZero feature gate is alpha and off on EKS).
   * @see https://kubernetes.io/docs/tasks/run-application/horizontal-pod-autoscale/#scaling-on-metrics-not-related-to-kubernetes-objects
   * @see https://github.com/kubernetes-sigs/prometheus-adapter/blob/master/docs/externalmetrics.md
   */
  public static readonly HPA = new Autoscaler('hpa');

  /** 'keda' or 'hpa'. */
  public readonly name: string;

  private constructor(name: string) {
    this.name = name;
  }
}
