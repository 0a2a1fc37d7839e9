import { Annotations, Duration, Fn, RemovalPolicy, Token } from 'aws-cdk-lib';
import * as aps from 'aws-cdk-lib/aws-aps';
import * as eks from 'aws-cdk-lib/aws-eks-v2';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as logs from 'aws-cdk-lib/aws-logs';
import { Construct, IDependable } from 'constructs';
import { acknowledgeManagedPolicies, logGroupKey } from './compliance';
import { podIdentityRole } from './pod-identity';
import { APP_COMPONENT, APP_INSTANCE, APP_NAME } from '../../k8s/private/labels';
import { ContainerInsightsOptions, ManagedPrometheusOptions } from '../cluster-observability';

/** The least scrape interval an AMP managed collector accepts. */
const MIN_SCRAPE_SECONDS = 30;

/** The EKS add-on of CloudWatch Container Insights with enhanced observability. */
export const CLOUDWATCH_ADDON = 'amazon-cloudwatch-observability';

/** The service account of the add-on's CloudWatch agent (namespace amazon-cloudwatch), which gets the role. */
export const CLOUDWATCH_AGENT_SERVICE_ACCOUNT = 'cloudwatch-agent';

/** The log groups Container Insights writes to, under `/aws/containerinsights/<cluster>/`. */
export const CONTAINER_INSIGHTS_LOG_GROUPS = ['application', 'dataplane', 'host', 'performance'];

/** What {@link installManagedPrometheus} made. */
export interface ManagedPrometheus {
  readonly workspaceArn: string;
  readonly workspace?: aps.CfnWorkspace;
  readonly scraper: aps.CfnScraper;
}

/**
 * An AMP workspace (unless one is given) and a managed collector on `cluster` writing to it. The collector's
 * network interfaces go into `subnetIds` with the cluster security group, which admits the nodes, their pods
 * and the API endpoint. AMP gives the collector's service-linked role its Kubernetes access itself: on a
 * cluster whose authentication mode is API (InferenceCluster's), creating the scraper creates an access entry
 * with the read-only policy AWS documents (nodes, pods, endpoints, services, ingresses, configmaps, /metrics).
 */
export function installManagedPrometheus(scope: Construct, cluster: eks.Cluster, clusterName: string, subnetIds: string[],
  options: ManagedPrometheusOptions): ManagedPrometheus {
  const interval = scrapeIntervalSeconds(options.scrapeInterval);
  let workspace: aps.CfnWorkspace | undefined;
  let workspaceArn = options.workspaceArn;
  if (workspaceArn === undefined) {
    workspace = new aps.CfnWorkspace(scope, 'PrometheusWorkspace', { alias: clusterName });
    workspace.applyRemovalPolicy(RemovalPolicy.DESTROY);
    workspaceArn = workspace.attrArn;
  } else {
    checkWorkspaceArn(workspaceArn);
  }
  const yaml = toYaml(prometheusScrapeConfig(clusterName, interval));
  const scraper = new aps.CfnScraper(scope, 'PrometheusScraper', {
    alias: clusterName,
    source: {
      eksConfiguration: {
        clusterArn: cluster.clusterArn,
        subnetIds,
        securityGroupIds: [cluster.clusterSecurityGroupId],
      },
    },
    destination: { ampConfiguration: { workspaceArn } },
    // The API takes the YAML base64-encoded; Fn::Base64 where the cluster's name is only known at deploy time.
    scrapeConfiguration: { configurationBlob: Token.isUnresolved(yaml) ? Fn.base64(yaml) : Buffer.from(yaml, 'utf8').toString('base64') },
  });
  return { workspaceArn, workspace, scraper };
}

/** What {@link installContainerInsights} made. */
export interface ContainerInsights {
  readonly addon: eks.CfnAddon;
  readonly role: iam.Role;
  readonly logGroups: logs.LogGroup[];
}

/**
 * The `amazon-cloudwatch-observability` EKS add-on with a Pod Identity role for its CloudWatch agent
 * (CloudWatchAgentServerPolicy only), after the Container Insights log groups it writes to.
 */
export function installContainerInsights(scope: Construct, cluster: eks.Cluster, clusterName: string,
  options: ContainerInsightsOptions, podIdentityAgent: IDependable | undefined): ContainerInsights {
  const retention = checkRetention(options.logRetention);
  const key = logGroupKey(scope, 'ContainerInsightsLogsKey');
  const logGroups = CONTAINER_INSIGHTS_LOG_GROUPS.map((name) => new logs.LogGroup(scope, `ContainerInsights${name[0].toUpperCase()}${name.slice(1)}Logs`, {
    logGroupName: `/aws/containerinsights/${clusterName}/${name}`,
    retention,
    encryptionKey: key,
    removalPolicy: RemovalPolicy.DESTROY,
  }));

  const roleScope = new Construct(scope, 'CloudWatchAgent');
  const role = podIdentityRole(roleScope, 'CloudWatch agent and Fluent Bit of the amazon-cloudwatch-observability add-on (Container Insights)');
  role.addManagedPolicy(iam.ManagedPolicy.fromAwsManagedPolicyName('CloudWatchAgentServerPolicy'));
  acknowledgeManagedPolicies(role, {
    CloudWatchAgentServerPolicy: 'The policy AWS documents for the CloudWatch agent of Container Insights: it writes metrics, '
      + 'log events and X-Ray segments, and reads its own SSM parameters.',
  });

  const addon = new eks.CfnAddon(scope, 'CloudWatchObservability', {
    clusterName: cluster.clusterName,
    addonName: CLOUDWATCH_ADDON,
    // Unpinned by default: EKS installs its default version for the cluster's Kubernetes version.
    addonVersion: options.addonVersion,
    resolveConflicts: 'OVERWRITE',
    podIdentityAssociations: [{ serviceAccount: CLOUDWATCH_AGENT_SERVICE_ACCOUNT, roleArn: role.roleArn }],
  });
  // Its log groups exist (with their retention) before Fluent Bit and the agent would create them.
  logGroups.forEach((g) => addon.node.addDependency(g));
  if (podIdentityAgent) {
    addon.node.addDependency(podIdentityAgent);
  } else {
    Annotations.of(scope).addWarningV2('disagg:containerInsightsPodIdentity',
      'the CloudWatch agent of Container Insights gets its IAM role through EKS Pod Identity, but addons.podIdentityAgent is off; '
      + 'install the agent yourself or Container Insights cannot write to CloudWatch.');
  }
  return { addon, role, logGroups };
}

/**
 * The managed collector's scrape configuration: the library's workloads, found by their labels
 * (`componentLabels`), with the labels the prometheus-operator objects of `Monitoring.prometheusOperator` give
 * them, so that the dashboards and alerts of docs/monitoring.md work on the AMP workspace as they are:
 *
 * - workers (`app.kubernetes.io/component` prefill or decode), every vLLM API port (`http`, `http-<rank>`):
 *   `deployment` (the pod's `app.kubernetes.io/instance`), `pool` (its component), `namespace`, `pod`,
 *   `container`, `endpoint` (the port's name), like the PodMonitor;
 * - routers (component router), port `http`, `honor_labels` (their own `endpoint` and `pool` labels win):
 *   `deployment`, `namespace`, `pod`, like the ServiceMonitor;
 * - kvstores (component kvstore), port `metrics`: `namespace`, `pod`.
 */
export function prometheusScrapeConfig(clusterName: string, intervalSeconds: number): any {
  const meta = (label: string) => `__meta_kubernetes_pod_label_${label.replace(/[./-]/g, '_')}`;
  // Keeps the targets of one component (a regex over components) on ports whose name matches `port`.
  const keep = (components: string, port: string) => ({
    source_labels: [meta(APP_NAME), meta(APP_COMPONENT), '__meta_kubernetes_pod_container_port_name'],
    separator: ';',
    regex: `disagg;${components};${port}`,
    action: 'keep',
  });
  const copy = (source: string, target: string) => ({ source_labels: [source], target_label: target });
  const deployment = copy(meta(APP_INSTANCE), 'deployment');
  const podLabels = [copy('__meta_kubernetes_namespace', 'namespace'), copy('__meta_kubernetes_pod_name', 'pod')];
  const job = (name: string, relabel: any[], extra: Record<string, unknown> = {}) => ({
    job_name: name,
    metrics_path: '/metrics',
    ...extra,
    kubernetes_sd_configs: [{ role: 'pod' }],
    relabel_configs: relabel,
  });
  return {
    global: {
      scrape_interval: `${intervalSeconds}s`,
      external_labels: { cluster: clusterName },
    },
    scrape_configs: [
      job('disagg-workers', [
        keep('(prefill|decode)', 'http(-[0-9]+)?'),
        deployment,
        copy(meta(APP_COMPONENT), 'pool'),
        ...podLabels,
        copy('__meta_kubernetes_pod_container_name', 'container'),
        copy('__meta_kubernetes_pod_container_port_name', 'endpoint'),
      ]),
      job('disagg-router', [keep('router', 'http'), deployment, ...podLabels], { honor_labels: true }),
      job('disagg-kvstore', [keep('kvstore', 'metrics'), ...podLabels]),
    ],
  };
}

/**
 * YAML of plain data (objects, arrays, strings, numbers, booleans): block style, every string double-quoted
 * (a JSON string is a valid YAML double-quoted scalar), so nothing is read as another type.
 */
export function toYaml(value: any, indent = ''): string {
  const scalar = (v: any) => (typeof v === 'string' ? JSON.stringify(v) : String(v));
  const isBlock = (v: any) => typeof v === 'object' && v !== null && (Array.isArray(v) ? v.length > 0 : Object.keys(v).length > 0);
  const empty = (v: any) => (Array.isArray(v) ? '[]' : '{}');
  const lines: string[] = [];
  if (Array.isArray(value)) {
    for (const item of value) {
      if (isBlock(item) && !Array.isArray(item)) {
        // The first key goes on the dash's line; the others line up under it.
        const body = toYaml(item, `${indent}  `);
        lines.push(`${indent}- ${body.slice(indent.length + 2)}`);
      } else if (isBlock(item)) {
        lines.push(`${indent}-`, toYaml(item, `${indent}  `));
      } else {
        lines.push(`${indent}- ${typeof item === 'object' && item !== null ? empty(item) : scalar(item)}`);
      }
    }
  } else {
    for (const [k, v] of Object.entries(value)) {
      if (v === undefined) continue;
      if (isBlock(v)) {
        lines.push(`${indent}${k}:`, toYaml(v, Array.isArray(v) ? indent : `${indent}  `));
      } else {
        lines.push(`${indent}${k}: ${typeof v === 'object' && v !== null ? empty(v) : scalar(v)}`);
      }
    }
  }
  return lines.join('\n');
}

function scrapeIntervalSeconds(interval: Duration | undefined): number {
  const seconds = (interval ?? Duration.seconds(MIN_SCRAPE_SECONDS)).toSeconds({ integral: false });
  if (!(Number.isInteger(seconds) && seconds >= MIN_SCRAPE_SECONDS)) {
    throw new Error(`'observability.managedPrometheus.scrapeInterval' (${seconds} s) must be a whole number of seconds, at least ${MIN_SCRAPE_SECONDS}: `
      + `an AMP managed collector scrapes no more often; use e.g. Duration.seconds(${MIN_SCRAPE_SECONDS})`);
  }
  return seconds;
}

function checkWorkspaceArn(arn: string): void {
  if (Token.isUnresolved(arn)) return;
  if (!/^arn:aws[a-z-]*:aps:[a-z0-9-]+:\d{12}:workspace\/ws-[0-9A-Za-z-]+$/.test(arn)) {
    throw new Error(`'observability.managedPrometheus.workspaceArn' (${arn}) is not an Amazon Managed Service for Prometheus workspace ARN; `
      + "write it like 'arn:aws:aps:us-east-2:111122223333:workspace/ws-0123abcd-4567-89ef-0123-456789abcdef' "
      + '(aws amp list-workspaces), or omit it for a new workspace');
  }
}

function checkRetention(retention: logs.RetentionDays | undefined): logs.RetentionDays {
  const days = retention ?? logs.RetentionDays.ONE_YEAR;
  const allowed = Object.values(logs.RetentionDays).filter((v): v is number => typeof v === 'number');
  if (!allowed.includes(days)) {
    throw new Error(`'observability.containerInsights.logRetention' (${days}) is not a retention CloudWatch Logs offers; `
      + `use a logs.RetentionDays value, e.g. logs.RetentionDays.ONE_MONTH (30), or one of ${allowed.join(', ')} days`);
  }
  return days;
}
