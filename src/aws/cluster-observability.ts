import { Duration } from 'aws-cdk-lib';
import * as logs from 'aws-cdk-lib/aws-logs';

/**
 * Options of the Amazon Managed Service for Prometheus destination: a workspace, and an AWS managed
 * collector (an agentless scraper that AMP runs in the cluster's subnets) that scrapes the library's
 * workloads into it.
 */
export interface ManagedPrometheusOptions {
  /**
   * ARN of an existing AMP workspace to write to, e.g.
   * `arn:aws:aps:us-east-2:111122223333:workspace/ws-0123abcd-4567-89ef-0123-456789abcdef`. A workspace
   * encrypted with a customer managed KMS key cannot take a managed collector's writes.
   *
   * @default - a new workspace, aliased after the cluster and deleted with the stack
   * @see https://docs.aws.amazon.com/prometheus/latest/userguide/AMP-onboard-create-workspace.html
   */
  readonly workspaceArn?: string;

  /**
   * How often the collector scrapes each target. The managed collector accepts no less than 30 seconds.
   *
   * @default Duration.seconds(30)
   * @see https://docs.aws.amazon.com/prometheus/latest/userguide/AMP-collector-how-to.html#AMP-collector-configuration
   */
  readonly scrapeInterval?: Duration;
}

/**
 * Options of CloudWatch Container Insights with enhanced observability, through the
 * `amazon-cloudwatch-observability` EKS add-on.
 */
export interface ContainerInsightsOptions {
  /**
   * How long CloudWatch keeps the Container Insights log groups
   * (`/aws/containerinsights/<cluster>/application`, `/dataplane`, `/host` and `/performance`), which this
   * construct creates (Fluent Bit and the agent would create them to keep their logs forever), encrypted
   * with a key of their own and deleted with the stack. Fluent Bit sends every container's stdout and stderr
   * to `/application`; on AL2023 nodes (this library's) `/dataplane` and `/host` stay empty, as AL2023 logs to
   * journald, which the add-on does not read by default.
   *
   * @default logs.RetentionDays.ONE_YEAR - the least AWS Control Tower's CT.CLOUDWATCH.PR.2 accepts, as for the control plane's logs
   * @see https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/Container-Insights-EKS-logs.html
   */
  readonly logRetention?: logs.RetentionDays;

  /**
   * Version of the `amazon-cloudwatch-observability` EKS add-on (3.1.0 or later: the agent gets its role
   * through EKS Pod Identity), e.g. `v4.3.0-eksbuild.1`.
   *
   * @default - the add-on's default version for the cluster's Kubernetes version
   * @see https://docs.aws.amazon.com/eks/latest/userguide/amazon-cloudwatch-observability.html
   */
  readonly addonVersion?: string;
}

/** The destinations of {@link ClusterObservability.of}. */
export interface ClusterObservabilityOptions {
  /**
   * Send the workloads' Prometheus metrics to Amazon Managed Service for Prometheus.
   *
   * @default - not sent
   */
  readonly managedPrometheus?: ManagedPrometheusOptions;

  /**
   * Install CloudWatch Container Insights with enhanced observability.
   *
   * @default - not installed
   */
  readonly containerInsights?: ContainerInsightsOptions;
}

/**
 * Where an {@link InferenceCluster} sends its monitoring on AWS:
 *
 * - `managedPrometheus`: an Amazon Managed Service for Prometheus workspace (or an existing one) and an
 *   AWS managed collector (`AWS::APS::Scraper`) that scrapes the routers, the prefill and decode workers
 *   and the kvstores with the labels the prometheus-operator objects of `Monitoring.prometheusOperator`
 *   give them (`deployment`, `pool`, `namespace`), so that the same dashboards and alerts work on it.
 * - `containerInsights`: the `amazon-cloudwatch-observability` EKS add-on (CloudWatch agent and Fluent Bit,
 *   with the NVIDIA GPU (DCGM), EFA and Neuron metrics of enhanced observability), its agent's role through
 *   EKS Pod Identity, and its log groups with a retention.
 *
 * @see https://docs.aws.amazon.com/prometheus/latest/userguide/AMP-collector.html
 * @see https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/Container-Insights-setup-EKS-addon.html
 */
export class ClusterObservability {
  /** Nothing beyond what the cluster already does (its control-plane logs). */
  public static none(): ClusterObservability {
    return new ClusterObservability({});
  }

  /** Amazon Managed Service for Prometheus only. */
  public static managedPrometheus(options: ManagedPrometheusOptions = {}): ClusterObservability {
    return new ClusterObservability({ managedPrometheus: options });
  }

  /** CloudWatch Container Insights only. */
  public static containerInsights(options: ContainerInsightsOptions = {}): ClusterObservability {
    return new ClusterObservability({ containerInsights: options });
  }

  /** Any combination of the destinations, e.g. `{ managedPrometheus: {}, containerInsights: {} }` for both. */
  public static of(options: ClusterObservabilityOptions): ClusterObservability {
    return new ClusterObservability(options);
  }

  /** The Amazon Managed Service for Prometheus options (undefined: not sent there). */
  public readonly managedPrometheusOptions?: ManagedPrometheusOptions;

  /** The Container Insights options (undefined: not installed). */
  public readonly containerInsightsOptions?: ContainerInsightsOptions;

  private constructor(options: ClusterObservabilityOptions) {
    this.managedPrometheusOptions = options.managedPrometheus;
    this.containerInsightsOptions = options.containerInsights;
  }
}
