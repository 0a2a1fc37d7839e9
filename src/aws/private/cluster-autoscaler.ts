/**
 * The Kubernetes Cluster Autoscaler of an InferenceCluster (internal): the official Helm chart, a role
 * assumed through EKS Pod Identity, and the version pins per Kubernetes minor.
 *
 * How it finds and sizes the accelerated managed node groups:
 * - Discovery: EKS tags every managed node group's Auto Scaling group for Cluster Autoscaler
 *   auto-discovery (`k8s.io/cluster-autoscaler/enabled`, `k8s.io/cluster-autoscaler/<cluster-name>`),
 *   and with `eks:cluster-name` / `eks:nodegroup-name`
 *   (https://docs.aws.amazon.com/eks/latest/userguide/managed-node-groups.html: "automatically tagged for
 *   auto-discovery by the Kubernetes Cluster Autoscaler"). Tags set on a managed node group do not reach
 *   its ASG, and need not: the chart's `--node-group-auto-discovery=asg:tag=...` finds the EKS tags.
 * - Scale from zero: for a group whose ASG carries `eks:nodegroup-name`, Cluster Autoscaler calls
 *   `eks:DescribeNodegroup` and builds the template node from the node group's labels, taints (those with
 *   a value) and its `k8s.io/cluster-autoscaler/node-template/resources/<resource>` *node group* tags
 *   (kubernetes/autoscaler cluster-autoscaler/cloudprovider/aws/aws_manager.go, buildNodeFromTemplate, and
 *   managed_nodegroup_cache.go, since CA 1.28; README "IAM Policy"). CPU, memory and the GPU count come
 *   from the instance type (DescribeInstanceTypes). AcceleratedNodeGroup therefore puts the resource tags
 *   on the node group itself (GPUs, Neuron devices and cores, EFA interfaces); label and taint
 *   `node-template` tags would only be read from the ASG, and DescribeNodegroup already gives both.
 */
import { Aws, Lazy, Stack } from 'aws-cdk-lib';
import * as eks from 'aws-cdk-lib/aws-eks-v2';
import * as iam from 'aws-cdk-lib/aws-iam';
import { Construct } from 'constructs';
import { acknowledgeWildcardResources } from './compliance';
import { podIdentityAssociation, podIdentityRole } from './pod-identity';
import { AddonVersions } from '../cluster-addons';
import { kubernetesMinor } from './kubernetes-version';

/** Namespace and service account of the autoscaler (the chart creates the account). */
export const CA_NAMESPACE = 'kube-system';
export const CA_SERVICE_ACCOUNT = 'cluster-autoscaler';

/** The chart's repository (https://github.com/kubernetes/autoscaler/tree/master/charts). */
export const CA_REPOSITORY = 'https://kubernetes.github.io/autoscaler';

/** Cluster Autoscaler's own default of `--max-graceful-termination-sec` (config/flags/flags.go). */
export const CA_DEFAULT_GRACE_SECONDS = 600;

/** Where Cluster Autoscaler's release images live (the chart's `image.repository` default). */
const CA_IMAGE_REPOSITORY = 'registry.k8s.io/autoscaling/cluster-autoscaler';

/** A chart and an image for one Kubernetes minor. */
export interface ClusterAutoscalerPin {
  /** Helm chart `cluster-autoscaler` version. */
  readonly chart: string;
  /** Image tag: the latest patch of the Cluster Autoscaler release whose minor is the cluster's. */
  readonly image: string;
}

/**
 * Cluster Autoscaler's minor must match the cluster's Kubernetes minor: its versions follow Kubernetes
 * minors exactly since 1.12, and its README recommends running it with the control plane version it was
 * meant for (cluster-autoscaler/README.md, "Releases", whose table also gives each minor's first chart:
 * 1.34.x with 9.51.0+, 1.33.x with 9.47.0+, 1.32.x with 9.45.0+). Each pin is the newest chart whose
 * `appVersion` has the cluster's minor, with the image set to the newest patch of that release.
 *
 * Source: kubernetes/autoscaler tags and charts (mirror of 2026-08-22), each chart listed in the gh-pages
 * index.yaml of the repository (generated 2026-07-26):
 * - chart 9.46.6 (appVersion 1.32.0, 2025-03-31), tag cluster-autoscaler-1.32.7 (2026-02-13);
 * - chart 9.51.0 (appVersion 1.33.0, 2025-10-10), tag cluster-autoscaler-1.33.6 (2026-07-22);
 * - chart 9.53.0 (appVersion 1.34.2, 2025-12-03), tag cluster-autoscaler-1.34.5 (2026-07-22);
 * - chart 9.59.0 (appVersion 1.35.0, 2026-07-21, the newest chart), tag cluster-autoscaler-1.35.2 (2026-07-22);
 * - 1.36: no chart has appVersion 1.36 yet (master's Chart.yaml is 9.59.0 / 1.35.0 on 2026-08-22), so
 *   chart 9.59.0 runs image v1.36.1 (tag of 2026-07-22). The chart passes `--cloud-provider`,
 *   `--namespace`, `--node-group-auto-discovery` and the extra args below, all of which 1.36.1 still
 *   defines (config/flags/flags.go at that tag).
 * The images are published by the project's release process under registry.k8s.io; they were not pulled here.
 */
const PINS: Record<number, ClusterAutoscalerPin> = {
  32: { chart: '9.46.6', image: 'v1.32.7' },
  33: { chart: '9.51.0', image: 'v1.33.6' },
  34: { chart: '9.53.0', image: 'v1.34.5' },
  35: { chart: AddonVersions.CLUSTER_AUTOSCALER_CHART, image: AddonVersions.CLUSTER_AUTOSCALER_IMAGE },
  36: { chart: AddonVersions.CLUSTER_AUTOSCALER_CHART, image: 'v1.36.1' },
};

/** The pinned chart and image for a Kubernetes version, or undefined when none is pinned. */
export function pinFor(kubernetesVersion: string): ClusterAutoscalerPin | undefined {
  const minor = kubernetesMinor(kubernetesVersion);
  return minor === undefined ? undefined : PINS[minor];
}

/**
 * The chart version and image tag to install: the pin of the cluster's minor, or the user's. Throws when
 * the cluster's version has no pin and the user gave none, or when an image's minor is not the cluster's.
 */
export function resolveClusterAutoscalerVersions(kubernetesVersion: string, chart: string | undefined,
  imageTag: string | undefined): ClusterAutoscalerPin {
  const pin = pinFor(kubernetesVersion);
  const minor = kubernetesMinor(kubernetesVersion);
  if (imageTag !== undefined) {
    const m = /^v?1\.(\d+)\.\d+/.exec(imageTag);
    if (!m) {
      throw new Error(`'addons.clusterAutoscaler.imageTag' (${imageTag}) is not a Cluster Autoscaler release tag; write it like 'v1.35.2'`);
    }
    if (minor !== undefined && Number(m[1]) !== minor) {
      throw new Error(`'addons.clusterAutoscaler.imageTag' (${imageTag}) is Cluster Autoscaler 1.${m[1]}, but the cluster runs Kubernetes `
        + `${kubernetesVersion}; Cluster Autoscaler's minor must match the cluster's: use a v1.${minor}.x tag`
        + (pin ? ` (e.g. '${pin.image}') or remove imageTag` : ''));
    }
  }
  if (pin) {
    return { chart: chart ?? pin.chart, image: imageTag ?? pin.image };
  }
  if (chart !== undefined && imageTag !== undefined) {
    return { chart, image: imageTag };
  }
  const known = Object.keys(PINS).map((k) => `1.${k}`).join(', ');
  throw new Error(`'kubernetesVersion' (${kubernetesVersion}) has no pinned Cluster Autoscaler (pins: ${known}), whose minor must match the `
    + 'cluster\'s. Set \'addons.clusterAutoscaler\' to { version: \'<cluster-autoscaler chart version>\', imageTag: \'v1.<minor>.<patch>\' } '
    + `for ${kubernetesVersion} (charts: ${CA_REPOSITORY}), or { enabled: false } and scale the node groups yourself.`);
}

/** An ARN as cdk-nag names it (Region and account as `<AWS::...>` tokens or values). */
function nagArn(service: string, resource: string): RegExp {
  const part = '(?:<AWS::\\w+>|[^:<>]+)';
  return new RegExp(`^arn:<AWS::Partition>:${service}:${part}:${part}:${resource}$`);
}

/** Why each wildcard resource of the policy stays (cdk-nag AwsSolutions-IAM5). */
const WILDCARD_REASONS: Array<[RegExp, string]> = [
  [/^\*$/, 'The Describe calls of Cluster Autoscaler (Auto Scaling groups and activities, launch templates, instance types, images) '
    + 'have no resource-level permissions in IAM: "*" is the only resource they accept.'],
  [nagArn('autoscaling', 'autoScalingGroup:\\*:autoScalingGroupName/\\*'),
    'The Auto Scaling groups of managed node groups are named by EKS and not known in advance: groups of this account and '
    + 'Region only, and only those that carry this cluster\'s eks:cluster-name tag (a condition on the statement).'],
  [nagArn('eks', 'nodegroup/.+/\\*/\\*'),
    'eks:DescribeNodegroup on this cluster\'s node groups only (their names and ids are generated): Cluster Autoscaler reads '
    + 'their labels, taints and node-template tags to scale a group up from zero nodes.'],
];

export interface ClusterAutoscalerProps {
  readonly cluster: eks.Cluster;
  readonly chartVersion: string;
  readonly imageTag: string;
  /** The longest `terminationGracePeriodSeconds` of the workloads' pods (read at synthesis). */
  readonly longestGraceSeconds: () => number;
}

/**
 * Cluster Autoscaler (Helm chart `cluster-autoscaler`, AWS provider, ASG auto-discovery) with an IAM
 * role assumed through EKS Pod Identity: the read calls its AWS README lists, DescribeNodegroup on this
 * cluster's node groups, and SetDesiredCapacity / TerminateInstanceInAutoScalingGroup only on Auto
 * Scaling groups tagged `eks:cluster-name=<this cluster>`. Every pinned release reads the credentials
 * the Pod Identity agent serves (AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE): 1.32 to 1.34 vendor
 * aws-sdk-go 1.48.7 (cloudprovider/aws/aws-sdk-go, whose endpointcreds provider reads it), 1.35 and
 * later use aws-sdk-go-v2.
 *
 * @see https://github.com/kubernetes/autoscaler/blob/master/cluster-autoscaler/cloudprovider/aws/README.md
 * @see https://github.com/kubernetes/autoscaler/blob/master/cluster-autoscaler/FAQ.md
 */
export class ClusterAutoscaler extends Construct {
  public readonly role: iam.Role;
  public readonly policy: iam.Policy;
  public readonly chart: eks.HelmChart;

  constructor(scope: Construct, id: string, props: ClusterAutoscalerProps) {
    super(scope, id);
    const { cluster } = props;
    const stack = Stack.of(this);
    const partition = Aws.PARTITION;

    this.role = podIdentityRole(this, 'Kubernetes Cluster Autoscaler (EKS Pod Identity)');

    this.policy = new iam.Policy(this, 'Policy', {
      statements: [
        new iam.PolicyStatement({
          // The read calls of the README's recommended policy ("Full Cluster Autoscaler Features Policy"):
          // auto-discovery and scaling activities, launch template data and instance types for a group's
          // template node (the launch-configuration and instance-requirements calls serve groups a user may
          // add to the cluster). None has resource-level permissions.
          sid: 'DescribeNodeGroups',
          actions: [
            'autoscaling:DescribeAutoScalingGroups', 'autoscaling:DescribeAutoScalingInstances',
            'autoscaling:DescribeLaunchConfigurations', 'autoscaling:DescribeScalingActivities',
            'ec2:DescribeImages', 'ec2:DescribeInstanceTypes', 'ec2:DescribeLaunchTemplateVersions',
            'ec2:GetInstanceTypesFromInstanceRequirements',
          ],
          resources: ['*'],
        }),
        new iam.PolicyStatement({
          // Labels, taints and node-template resource tags of a managed node group at zero nodes.
          sid: 'DescribeManagedNodeGroups',
          actions: ['eks:DescribeNodegroup'],
          resources: [`arn:${partition}:eks:${stack.region}:${stack.account}:nodegroup/${cluster.clusterName}/*/*`],
        }),
        new iam.PolicyStatement({
          // Only the Auto Scaling groups EKS created for this cluster's managed node groups, which it tags
          // eks:cluster-name (the tag Cluster Autoscaler itself reads to call DescribeNodegroup).
          sid: 'ScaleThisClustersNodeGroups',
          actions: ['autoscaling:SetDesiredCapacity', 'autoscaling:TerminateInstanceInAutoScalingGroup'],
          resources: [`arn:${partition}:autoscaling:${stack.region}:${stack.account}:autoScalingGroup:*:autoScalingGroupName/*`],
          conditions: { StringEquals: { 'aws:ResourceTag/eks:cluster-name': cluster.clusterName } },
        }),
      ],
    });
    this.policy.attachToRole(this.role);
    acknowledgeWildcardResources(this.policy, (resource) => WILDCARD_REASONS.find(([pattern]) => pattern.test(resource))?.[1]);

    const association = podIdentityAssociation(this, cluster, CA_NAMESPACE, CA_SERVICE_ACCOUNT, this.role);

    this.chart = new eks.HelmChart(this, 'Chart', {
      cluster,
      chart: 'cluster-autoscaler',
      repository: CA_REPOSITORY,
      version: props.chartVersion,
      release: 'cluster-autoscaler',
      namespace: CA_NAMESPACE,
      values: {
        cloudProvider: 'aws',
        awsRegion: stack.region,
        autoDiscovery: { clusterName: cluster.clusterName },
        fullnameOverride: 'cluster-autoscaler',
        image: { repository: CA_IMAGE_REPOSITORY, tag: props.imageTag },
        rbac: { serviceAccount: { create: true, name: CA_SERVICE_ACCOUNT } },
        // On the system nodes, which carry no accelerator taint; a kube-system pod also keeps its node
        // from being scaled down (--skip-nodes-with-system-pods stays true).
        nodeSelector: { 'disagg.dev/pool-role': 'system' },
        // Its example manifest's figures (cloudprovider/aws/examples/cluster-autoscaler-autodiscover.yaml).
        resources: {
          requests: { cpu: '100m', memory: '600Mi' },
          limits: { memory: '600Mi' },
        },
        // The image is distroless `nonroot` (UID 65532) and writes nothing to disk (logs to stderr).
        securityContext: {
          runAsNonRoot: true,
          runAsUser: 65532,
          runAsGroup: 65532,
          seccompProfile: { type: 'RuntimeDefault' },
        },
        containerSecurityContext: {
          allowPrivilegeEscalation: false,
          readOnlyRootFilesystem: true,
          capabilities: { drop: ['ALL'] },
        },
        extraArgs: {
          // The chart's own defaults, kept (extraArgs replaces the map).
          'logtostderr': true,
          'stderrthreshold': 'info',
          'v': 4,
          // The group that wastes the least CPU and memory after the pending pods are placed; groups of
          // other instance types or roles differ in labels and never take the same pods.
          'expander': 'least-waste',
          // Several groups of one type and role (one per Availability Zone: EFA groups are single-subnet)
          // grow together.
          'balance-similar-node-groups': true,
          // A pool's autoscaler decides which replica leaves (the router drains it first); Cluster
          // Autoscaler removes a node once it is empty and never evicts a worker to pack nodes tighter:
          // workers mount emptyDirs (/dev/shm, the model cache), which this keeps a node for.
          'skip-nodes-with-local-storage': true,
          // If it does drain a node (a pod without local storage), it waits as long as the longest
          // grace period of the workloads, which is sized so that streams in flight finish.
          'max-graceful-termination-sec': Lazy.uncachedNumber({ produce: () => Math.max(CA_DEFAULT_GRACE_SECONDS, props.longestGraceSeconds()) }),
        },
      },
    });
    this.chart.node.addDependency(association);
    this.chart.node.addDependency(this.policy);
  }
}
