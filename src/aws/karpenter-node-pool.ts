import { Annotations, Size, Token } from 'aws-cdk-lib';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as eks from 'aws-cdk-lib/aws-eks-v2';
import * as iam from 'aws-cdk-lib/aws-iam';
import { Construct } from 'constructs';
import { AcceleratedInstanceType, NetworkInterfaceType, PurchaseOption } from '../catalog';
import { NodeCapacity } from './node-capacity';
import { NodeLabels } from './node-labels';
import { acceleratedNodeLabels, acceleratedNodeTaints, checkRootVolume, DEFAULT_ROOT_VOLUME } from './private/accelerated-nodes';
import { needsComputeDomain } from './private/dra-drivers';

/** Options for a {@link KarpenterNodePool} that do not name the cluster. */
export interface KarpenterNodePoolOptions {
  /** The instance type, from the catalog (AMI variant, taints, labels and EFA layout derive from it). */
  readonly instanceType: AcceleratedInstanceType;

  /**
   * The IAM role of the nodes, as Karpenter's getting-started guide creates it (`KarpenterNodeRole-<cluster>`):
   * it must already have an EKS access entry of type `EC2_LINUX` (or an aws-auth mapping) so that the nodes
   * can join. Karpenter creates the instance profile for it.
   *
   * @see https://karpenter.sh/docs/concepts/nodeclasses/#specrole
   */
  readonly nodeRole: iam.IRole;

  /**
   * How the instances are bought: `karpenter.sh/capacity-type` `on-demand`, `spot`, or `reserved` for
   * an On-Demand Capacity Reservation or a Capacity Block (selected by id in the EC2NodeClass's
   * `capacityReservationSelectorTerms`; Karpenter's `ReservedCapacity` feature gate, beta and on by
   * default from v1.6, which added Capacity Blocks).
   *
   * @default NodeCapacity.onDemand()
   * @see https://karpenter.sh/docs/tasks/odcrs/
   */
  readonly capacity?: NodeCapacity;

  /**
   * A static NodePool of this many nodes (`spec.replicas`, Karpenter's alpha `StaticCapacity` feature
   * gate from v1.8): Karpenter keeps the count whatever the pods ask for, which suits Capacity Blocks and
   * reservations, and is the mode EKS documents DRA with on Karpenter before v1.15. Once set, a NodePool
   * cannot become dynamic (and back).
   *
   * @default - a dynamic NodePool: nodes are launched for pending pods, up to `maxNodes`
   * @see https://karpenter.sh/docs/concepts/nodepools/#specreplicas
   */
  readonly replicas?: number;

  /**
   * The most nodes the NodePool may have (`spec.limits.nodes`). A dynamic NodePool launches nodes for
   * the pods an autoscaled pool adds and consolidates them when it shrinks; this must hold every pool
   * at its `autoscaling.maxReplicas` (`InferenceCluster.addWorkload` checks it).
   *
   * @default - `replicas` for a static NodePool; no limit for a dynamic one
   */
  readonly maxNodes?: number;

  /**
   * Subnets of the nodes (`subnetSelectorTerms` by id). EFA types need exactly one (EFA does not cross
   * Availability Zones).
   *
   * @default - EFA types: the first private subnet (the one in the reservation's zone when that is known);
   * other types: every private subnet
   */
  readonly subnets?: ec2.SubnetSelection;

  /**
   * The self-referencing EFA security group for EFA types, next to the cluster security group.
   *
   * @default - none, which EFA types refuse: pass the cluster's (InferenceCluster.efaSecurityGroup);
   * InferenceCluster.addKarpenterNodePool passes it
   */
  readonly efaSecurityGroup?: ec2.ISecurityGroup;

  /**
   * A placement group for the nodes (`placementGroupSelector` by name; Karpenter v1.11 or later, whose
   * controller role needs `ec2:DescribePlacementGroups`).
   *
   * @default - no placement group
   * @see https://karpenter.sh/docs/concepts/nodeclasses/#specplacementgroupselector
   */
  readonly placementGroup?: ec2.IPlacementGroup;

  /**
   * Value of the `disagg.dev/pool-role` label.
   *
   * @default 'inference'
   */
  readonly poolRole?: string;

  /**
   * Extra Kubernetes labels.
   *
   * @default - none
   */
  readonly labels?: { [key: string]: string };

  /**
   * Extra taints, added to the accelerator taint.
   *
   * @default - none
   */
  readonly taints?: eks.TaintSpec[];

  /**
   * Size of the root EBS volume (gp3, encrypted), whole GiB from 20 to 16,384.
   *
   * @default Size.gibibytes(300)
   */
  readonly rootVolumeSize?: Size;

  /**
   * The EKS-optimized AL2023 AMI release (`amiSelectorTerms` alias `al2023@<version>`); Karpenter picks the
   * NVIDIA or Neuron variant for the instance type. Pinned by default: with `latest` Karpenter replaces
   * every node (drift) whenever AWS publishes a new AMI, which for GPU nodes means reloading every model,
   * on AWS's schedule. Move the pin deliberately, a pool at a time.
   *
   * @default KarpenterNodePool.DEFAULT_AMI_VERSION
   * @see https://karpenter.sh/docs/concepts/nodeclasses/#specamiselectorterms
   */
  readonly amiVersion?: string;

  /**
   * Name of the NodePool and of its EC2NodeClass.
   *
   * @default - derived from the construct path
   */
  readonly nodePoolName?: string;
}

/** Properties of a {@link KarpenterNodePool}. */
export interface KarpenterNodePoolProps extends KarpenterNodePoolOptions {
  /** The cluster, which runs Karpenter (v1 API; v1.11 or later for EFA interfaces and placement groups). */
  readonly cluster: eks.ICluster;
}


/**
 * A Karpenter `NodePool` and `EC2NodeClass` (karpenter.sh/v1, karpenter.k8s.aws/v1) for one accelerated
 * instance type: the alternative to an {@link AcceleratedNodeGroup} for clusters that run Karpenter (as
 * awslabs/ai-on-eks does). The nodes carry the same labels and taint as the managed node groups, so the
 * workload constructs select them the same way.
 *
 * It does not install Karpenter: the cluster must run it (controller, CRDs, an IAM role with the
 * permissions of its getting-started guide). For EFA types the EC2NodeClass lists the instance type's
 * interfaces (an ENA primary plus `efa-only` interfaces), which Karpenter supports from v1.11.
 *
 * EKS documents DRA (the NVIDIA DRA driver that p6e-gb200 needs, and the Neuron DRA driver) on Karpenter
 * with static capacity, and with dynamic provisioning from Karpenter v1.15 behind feature gates; the EFA
 * DRA driver is documented for managed and self-managed node groups.
 *
 * @see https://karpenter.sh/docs/concepts/nodepools/
 * @see https://karpenter.sh/docs/concepts/nodeclasses/
 * @see https://docs.aws.amazon.com/eks/latest/userguide/device-management-nvidia-dra-device-plugin.html
 */
export class KarpenterNodePool extends Construct {
  /**
   * The EKS AL2023 AMI release NodePools use unless told otherwise. Source: awslabs/amazon-eks-ami
   * release v20260903, which public Terraform pins name as the AL2023 release for Kubernetes 1.35
   * (`1.35.7-20260903`, the cluster's default version). A cluster on another Kubernetes version needs a
   * release built for it: check `aws ssm get-parameters-by-path --path /aws/service/eks/optimized-ami/<k8s>/amazon-linux-2023/`.
   */
  public static readonly DEFAULT_AMI_VERSION = 'v20260903';

  /** Name of the NodePool (and of the EC2NodeClass). */
  public readonly nodePoolName: string;

  /** The instance type. */
  public readonly instanceType: AcceleratedInstanceType;

  /** The Kubernetes labels of the nodes. */
  public readonly labels: { [key: string]: string };

  /** The taints of the nodes. */
  public readonly taints: eks.TaintSpec[];

  /** The static node count (undefined for a dynamic NodePool). */
  public readonly replicas?: number;

  /** The node limit (undefined when unlimited). */
  public readonly maxNodes?: number;

  /** The manifest that applies the EC2NodeClass and the NodePool. */
  public readonly manifest: eks.KubernetesManifest;

  constructor(scope: Construct, id: string, props: KarpenterNodePoolProps) {
    super(scope, id);
    const type = props.instanceType;
    if (type === undefined || type === null || typeof (type as any).networkInterfaceLayout !== 'function') {
      throw new Error(`'instanceType' (${type}) must be an AcceleratedInstanceType from the catalog, e.g. AcceleratedInstanceType.P5EN_48XLARGE`);
    }
    this.instanceType = type;
    const capacity = props.capacity ?? NodeCapacity.onDemand();
    if (!type.supportsPurchaseOption(capacity.purchaseOption)) {
      throw new Error(`'capacity' (${capacity.purchaseOption}) is not available for ${type.name}, which can be bought as: `
        + `${type.purchaseOptions.join(', ')}; use a matching NodeCapacity (a Capacity Block: NodeCapacity.capacityBlock('cr-...'))`);
    }
    this.replicas = checkCount('replicas', props.replicas, 0);
    const maxNodes = checkCount('maxNodes', props.maxNodes, 1);
    if (this.replicas !== undefined && maxNodes !== undefined && maxNodes < this.replicas) {
      throw new Error(`'maxNodes' (${maxNodes}) is below 'replicas' (${this.replicas}); raise maxNodes or leave it unset`);
    }
    this.maxNodes = maxNodes ?? this.replicas;
    const rootGib = checkRootVolume(props.rootVolumeSize ?? DEFAULT_ROOT_VOLUME);
    const amiVersion = props.amiVersion ?? KarpenterNodePool.DEFAULT_AMI_VERSION;
    if (!/^(latest|v\d{8}(\.\d+)?)$/.test(amiVersion)) {
      throw new Error(`'amiVersion' (${amiVersion}) must be 'latest' or an EKS AMI release such as 'v20261120'`);
    }

    if (needsComputeDomain(type) && this.replicas === undefined) {
      Annotations.of(this).addWarningV2('disagg:karpenterDynamicDra',
        `${type.name} needs DRA (the NVIDIA DRA driver's ComputeDomains), which EKS documents on Karpenter with static capacity `
        + "('replicas'), or with dynamic provisioning from Karpenter v1.15 with its DRA feature gates; set 'replicas' (the UltraServer's "
        + 'instances you reserved) unless your Karpenter has them.');
    }

    this.nodePoolName = props.nodePoolName ?? kubeName(this.node.path);
    const subnetIds = this.resolveSubnetIds(props.cluster.vpc, type, capacity, props.subnets);

    const securityGroups = [{ id: props.cluster.clusterSecurityGroupId }];
    if (type.supportsEfa) {
      if (!props.efaSecurityGroup) {
        throw new Error(`'efaSecurityGroup' is required for ${type.name}, an EFA type: EFA traffic needs a security group that allows all `
          + 'traffic to and from itself; pass inferenceCluster.efaSecurityGroup (or use InferenceCluster.addKarpenterNodePool, which does)');
      }
      securityGroups.push({ id: props.efaSecurityGroup.securityGroupId });
    }

    this.labels = acceleratedNodeLabels(type, props.poolRole, props.labels);
    this.taints = acceleratedNodeTaints(type, props.taints);

    const nodeClass = {
      apiVersion: 'karpenter.k8s.aws/v1',
      kind: 'EC2NodeClass',
      metadata: { name: this.nodePoolName },
      spec: {
        role: props.nodeRole.roleName,
        amiSelectorTerms: [{ alias: `al2023@${amiVersion}` }],
        subnetSelectorTerms: subnetIds.map((subnetId) => ({ id: subnetId })),
        securityGroupSelectorTerms: securityGroups,
        ...(capacity.reservationId ? { capacityReservationSelectorTerms: [{ id: capacity.reservationId }] } : {}),
        ...(type.supportsEfa ? { networkInterfaces: karpenterInterfaces(type) } : {}),
        ...(props.placementGroup ? { placementGroupSelector: { name: props.placementGroup.placementGroupName } } : {}),
        ...(type.localNvmeCount > 0 ? { instanceStorePolicy: 'RAID0' } : {}),
        metadataOptions: { httpEndpoint: 'enabled', httpTokens: 'required', httpPutResponseHopLimit: 1 },
        blockDeviceMappings: [{
          deviceName: '/dev/xvda',
          rootVolume: true,
          ebs: { volumeSize: `${rootGib}Gi`, volumeType: 'gp3', encrypted: true, deleteOnTermination: true },
        }],
        tags: { [NodeLabels.INSTANCE_TYPE]: type.name },
      },
    };

    const nodePool = {
      apiVersion: 'karpenter.sh/v1',
      kind: 'NodePool',
      metadata: { name: this.nodePoolName },
      spec: {
        ...(this.replicas !== undefined ? { replicas: this.replicas } : {}),
        template: {
          metadata: { labels: this.labels },
          spec: {
            nodeClassRef: { group: 'karpenter.k8s.aws', kind: 'EC2NodeClass', name: this.nodePoolName },
            requirements: [
              { key: 'node.kubernetes.io/instance-type', operator: 'In', values: [type.name] },
              { key: 'karpenter.sh/capacity-type', operator: 'In', values: [karpenterCapacityType(capacity)] },
              ...(capacity.availabilityZone ? [{ key: 'topology.kubernetes.io/zone', operator: 'In', values: [capacity.availabilityZone] }] : []),
            ],
            taints: this.taints.map((t) => ({ key: t.key, value: t.value, effect: taintEffect(t.effect) })),
            // Accelerated nodes are not recycled on a timer: a replacement may not be available.
            expireAfter: 'Never',
          },
        },
        ...(this.maxNodes !== undefined ? { limits: { nodes: this.maxNodes } } : {}),
        ...(this.replicas === undefined ? {
          // Scale empty nodes in after a while, but never move a running model to consolidate.
          disruption: { consolidationPolicy: 'WhenEmpty', consolidateAfter: '10m' },
        } : {}),
      },
    };

    this.manifest = new eks.KubernetesManifest(this, 'Resource', {
      cluster: props.cluster,
      manifest: [nodeClass, nodePool],
    });
  }

  /** Subnet ids: the selection, or private subnets (one for EFA, in the reservation's zone when known). */
  private resolveSubnetIds(vpc: ec2.IVpc | undefined, type: AcceleratedInstanceType, capacity: NodeCapacity,
    requested: ec2.SubnetSelection | undefined): string[] {
    if (!vpc) {
      throw new Error("the cluster has no VPC; import it with 'vpc' (eks.Cluster.fromClusterAttributes({ vpc, ... }))");
    }
    let subnets: ec2.ISubnet[];
    if (requested) {
      subnets = vpc.selectSubnets(requested).subnets;
    } else {
      const candidates = vpc.privateSubnets.length > 0 ? vpc.privateSubnets : vpc.isolatedSubnets;
      const az = capacity.availabilityZone;
      const inZone = az && !Token.isUnresolved(az) ? candidates.filter((s) => s.availabilityZone === az) : candidates;
      subnets = type.supportsEfa ? inZone.slice(0, 1) : inZone;
    }
    if (subnets.length === 0) {
      throw new Error(`no subnet for the ${type.name} NodePool: the VPC has no private subnet${capacity.availabilityZone ? ` in ${capacity.availabilityZone}` : ''}; pass 'subnets'`);
    }
    if (type.supportsEfa && subnets.length !== 1) {
      throw new Error(`'subnets' selects ${subnets.length} subnets for the EFA NodePool of ${type.name}; EFA traffic does not cross Availability `
        + 'Zones, so select exactly one subnet, e.g. { subnets: [vpc.privateSubnets[0]] }');
    }
    return subnets.map((s) => s.subnetId);
  }
}

/**
 * Karpenter's capacity type: ODCRs and Capacity Blocks are `reserved` (not `on-demand`).
 * @see https://karpenter.sh/docs/tasks/odcrs/
 */
function karpenterCapacityType(capacity: NodeCapacity): string {
  switch (capacity.purchaseOption) {
    case PurchaseOption.SPOT: return 'spot';
    case PurchaseOption.CAPACITY_RESERVATION:
    case PurchaseOption.CAPACITY_BLOCK: return 'reserved';
    default: return 'on-demand';
  }
}

/**
 * The EC2NodeClass `networkInterfaces`: Karpenter takes `interface` and `efa-only` only, with the ENA
 * primary at card 0 device 0 and at most one EFA per card (its CRD validation rules, v1.14.1), which is
 * the shape of the catalog's layout.
 * @see https://karpenter.sh/docs/concepts/nodeclasses/#specnetworkinterfaces
 */
function karpenterInterfaces(type: AcceleratedInstanceType): Array<{ networkCardIndex: number; deviceIndex: number; interfaceType: string }> {
  return type.networkInterfaceLayout().map((slot) => {
    if (slot.interfaceType === NetworkInterfaceType.EFA) {
      throw new Error(`${type.name}: card ${slot.networkCardIndex} device ${slot.deviceIndex} is an 'efa' interface, which a Karpenter `
        + "EC2NodeClass cannot express (it takes 'interface' and 'efa-only'); use an AcceleratedNodeGroup for this type");
    }
    return { networkCardIndex: slot.networkCardIndex, deviceIndex: slot.deviceIndex, interfaceType: slot.interfaceType };
  });
}

function taintEffect(effect: eks.TaintEffect | undefined): string {
  switch (effect) {
    case eks.TaintEffect.NO_EXECUTE: return 'NoExecute';
    case eks.TaintEffect.PREFER_NO_SCHEDULE: return 'PreferNoSchedule';
    default: return 'NoSchedule';
  }
}


function checkCount(prop: string, value: number | undefined, min: number): number | undefined {
  if (value === undefined) {
    return undefined;
  }
  if (!(Number.isInteger(value) && value >= min)) {
    throw new Error(`'${prop}' (${value}) must be a whole number >= ${min}`);
  }
  return value;
}


/** A DNS-1123 name from a construct path (NodePool names are cluster-scoped). */
function kubeName(path: string): string {
  const name = path.toLowerCase().replace(/[^a-z0-9-]+/g, '-').replace(/^-+|-+$/g, '');
  return name.length <= 63 ? name : name.slice(name.length - 63).replace(/^-+/, '');
}
