import { k8s } from 'cdk8s-plus-28';
import { Construct } from 'constructs';
import {
  PodMonitor, PodMonitorSpecPodMetricsEndpointsRelabelings, PrometheusRule, PrometheusRuleSpecGroupsRulesExpr, ServiceMonitor,
} from '../../imports/monitoring.coreos.com';
import { PrometheusOperatorMonitoringOptions } from '../monitoring';
import { APP_COMPONENT, APP_INSTANCE, APP_NAME, APP_PART_OF } from './labels';
import { alertGroup } from './monitoring-alerts';
import { dashboardModels } from './monitoring-dashboards';
import { MonitoredDeployment } from './monitoring-queries';

/** The label of ConfigMaps the Grafana chart's dashboard sidecar loads (`sidecar.dashboards.label`, value "1"). */
export const GRAFANA_DASHBOARD_LABEL = 'grafana_dashboard';

/** Inputs of {@link addDeploymentMonitoring} (internal). */
export interface DeploymentMonitoringInputs extends MonitoredDeployment {
  /** The prometheus-operator options, with their defaults applied (Monitoring.prometheusOperator). */
  readonly options: PrometheusOperatorMonitoringOptions;
  /** Labels of the monitoring objects (the user's `labels` come first). */
  readonly labels: Record<string, string>;
  /** Names of the workers' vLLM API ports: 'http', or 'http-<rank>' on per-rank expert-parallel pods. */
  readonly workerPortNames: string[];
  /** The router Service's labels (its selector). */
  readonly routerLabels: Record<string, string>;
}

/** A relabeling that sets `label` to a constant on every series of the target. */
function constantLabel(label: string, value: string): PodMonitorSpecPodMetricsEndpointsRelabelings {
  return { targetLabel: label, replacement: value };
}

/** Scrape interval as prometheus-operator writes durations ('15s'). */
function interval(options: PrometheusOperatorMonitoringOptions): string {
  return `${options.scrapeInterval!.toSeconds()}s`;
}

/**
 * Adds a deployment's prometheus-operator objects to `scope` (a PodMonitor on the workers, a ServiceMonitor
 * on the router, a PrometheusRule, the dashboards' ConfigMaps) and returns the dashboards' JSON by slug.
 */
export function addDeploymentMonitoring(scope: Construct, inputs: DeploymentMonitoringInputs): Record<string, string> {
  const { name, namespace, options } = inputs;
  const metadata = (objectName: string, extra?: Record<string, string>) => ({
    name: objectName,
    ...(namespace ? { namespace } : {}),
    labels: { ...options.labels, ...inputs.labels, [APP_PART_OF]: 'disagg', ...extra },
  });
  const deployment = constantLabel('deployment', name);

  // The prefill and decode pods (every pod of a per-rank expert-parallel pool, the leaders of a
  // multi-node tensor-parallel one: only they have the API port) on each vLLM API port.
  new PodMonitor(scope, 'WorkersPodMonitor', {
    metadata: metadata(`${name}-workers`),
    spec: {
      selector: {
        matchLabels: { [APP_NAME]: 'disagg', [APP_INSTANCE]: name },
        matchExpressions: [{ key: APP_COMPONENT, operator: 'In', values: ['prefill', 'decode'] }],
      },
      podMetricsEndpoints: inputs.workerPortNames.map(port => ({
        port,
        path: '/metrics',
        interval: interval(options),
        relabelings: [
          deployment,
          { sourceLabels: ['__meta_kubernetes_pod_label_app_kubernetes_io_component'], targetLabel: 'pool' },
        ],
      })),
    },
  });

  // The router through its Service: the series get `namespace` and `service`, which the HPA's external
  // metric selects on. honorLabels keeps the router's own `endpoint` label (the worker a series is
  // about) over the operator's target label of the same name (the port).
  new ServiceMonitor(scope, 'RouterServiceMonitor', {
    metadata: metadata(`${name}-router`),
    spec: {
      selector: { matchLabels: inputs.routerLabels },
      endpoints: [{ port: 'http', path: '/metrics', interval: interval(options), honorLabels: true, relabelings: [deployment] }],
    },
  });

  if (options.alerts) {
    const group = alertGroup(inputs);
    new PrometheusRule(scope, 'Alerts', {
      metadata: metadata(name),
      spec: {
        groups: [{
          name: group.name,
          rules: group.rules.map(r => ({ ...r, expr: PrometheusRuleSpecGroupsRulesExpr.fromString(r.expr) })),
        }],
      },
    });
  }

  const dashboards: Record<string, string> = {};
  if (options.dashboards) {
    for (const [slug, model] of Object.entries(dashboardModels(inputs))) {
      dashboards[slug] = JSON.stringify(model, undefined, 2);
      new k8s.KubeConfigMap(scope, `Dashboard-${slug}`, {
        metadata: metadata(`${name}-dashboard-${slug}`, { [GRAFANA_DASHBOARD_LABEL]: '1' }),
        data: { [`${slug}.json`]: dashboards[slug] },
      });
    }
  }
  return dashboards;
}

/** Inputs of {@link addServiceMonitor} (internal). */
export interface ServiceMonitorInputs {
  readonly name: string;
  readonly namespace?: string;
  readonly options: PrometheusOperatorMonitoringOptions;
  /** Labels of the object (the user's `labels` come first) and of the Service it selects. */
  readonly labels: Record<string, string>;
  readonly port: string;
}

/** A ServiceMonitor on one port of a Service (the kvstore's `metrics`). */
export function addServiceMonitor(scope: Construct, id: string, inputs: ServiceMonitorInputs): void {
  new ServiceMonitor(scope, id, {
    metadata: {
      name: inputs.name,
      ...(inputs.namespace ? { namespace: inputs.namespace } : {}),
      labels: { ...inputs.options.labels, ...inputs.labels, [APP_PART_OF]: 'disagg' },
    },
    spec: {
      selector: { matchLabels: inputs.labels },
      endpoints: [{ port: inputs.port, path: '/metrics', interval: interval(inputs.options) }],
    },
  });
}
