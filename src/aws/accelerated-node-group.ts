import { Annotations, Fn, Size, Token } from 'aws-cdk-lib';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as eks from 'aws-cdk-lib/aws-eks-v2';
import * as iam from 'aws-cdk-lib/aws-iam';
import { Construct } from 'constructs';
import { AcceleratedInstanceType, AcceleratorVendor, CpuArchitecture, EksAmiType, PurchaseOption } from '../catalog';
import { EfaSecurityGroup } from './efa-security-group';
import { NodeCapacity, NodePlacement } from './node-capacity';
import { NodeLabels } from './node-labels';
import {
  acceleratedNodeLabels, acceleratedNodeTaints, checkRootVolume, CLUSTER_AUTOSCALER_GPU_LABEL, clusterAutoscalerResourceTags, DEFAULT_ROOT_VOLUME,
} from './private/accelerated-nodes';
import { acknowledgeLaunchTemplateControls, acknowledgeNodeRole } from './private/compliance';
import { nodeadmUserData } from './private/node-user-data';

/**
 * How EKS replaces the nodes of a managed node group during a version or launch template update.
 *
 * @see https://docs.aws.amazon.com/eks/latest/APIReference/API_NodegroupUpdateConfig.html
 * @see https://docs.aws.amazon.com/eks/latest/userguide/managed-node-update-behavior.html
 */
export enum NodeUpdateStrategy {
  /**
   * Launch the new instances first, then terminate the old ones. Needs spare capacity of the type
   * (up to twice the group's Availability Zones, or maxUnavailable, more instances during the update).
   */
  DEFAULT = 'DEFAULT',
  /**
   * Terminate old instances first, then launch their replacements: no spare capacity needed, which is
   * what a full Capacity Block, ODCR or placement group allows. EKS names it for accelerators.
   */
  MINIMAL = 'MINIMAL',
}

/** Options for an {@link AcceleratedNodeGroup} that do not name the cluster. */
export interface AcceleratedNodeGroupOptions {
  /** The instance type, from the catalog (AMI type, taints, labels and EFA layout derive from it). */
  readonly instanceType: AcceleratedInstanceType;

  /**
   * How the instances are bought.
   *
   * @default NodeCapacity.onDemand()
   */
  readonly capacity?: NodeCapacity;

  /**
   * Desired number of nodes when the stack is created.
   *
   * The default creates the group empty, so that a deploy never waits for (and never rolls back over)
   * accelerators that are short On-Demand or a Capacity Block that is not active yet; scale it with
   * `aws eks update-nodegroup-config --scaling-config desiredSize=N` (or set this prop) once the
   * capacity is there. EKS asks Capacity Block groups to stay at 0 until the block is active.
   *
   * @default 0
   * @see https://docs.aws.amazon.com/eks/latest/userguide/capacity-blocks.html
   */
  readonly desiredSize?: number;

  /**
   * Minimum number of nodes.
   *
   * @default - desiredSize
   */
  readonly minSize?: number;

  /**
   * Maximum number of nodes. For pools with `autoscaling` it must hold every pool at its
   * `maxReplicas` (`InferenceCluster.addWorkload` checks it). A managed node group does not grow by
   * itself: `InferenceCluster` installs a Cluster Autoscaler (`addons.clusterAutoscaler`) that moves it
   * between `minSize` and `maxSize` once a workload is autoscaled; or use `addKarpenterNodePool`.
   *
   * @default - desiredSize, and at least 1 (room to scale an empty group up without a redeploy)
   */
  readonly maxSize?: number;

  /**
   * Subnets (and so Availability Zones) for the nodes. EFA node groups must resolve to exactly one
   * subnet (EFA traffic stays in one AZ); with a reservation whose `availabilityZone` is known, every
   * selected subnet must be in that zone. Pick the zone where the instance type (or your reservation)
   * is: p5en, p6 and trn2 exist in few zones.
   *
   * @default - EFA types: one private subnet (the one in the reservation's AZ when that is known);
   * other types: every private subnet (only those of the reservation's AZ when that is known)
   * @see https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-capacity-blocks.html
   */
  readonly subnets?: ec2.SubnetSelection;

  /**
   * Where the nodes are placed: `NodePlacement.sharedGroup(group)` puts a prefill and a decode group
   * of one instance type in one cluster placement group, so their KV transfer stays inside it.
   * Capacity Reservations and Capacity Blocks that were not reserved in a placement group cannot be
   * launched into it.
   *
   * @default NodePlacement.automatic() - a new cluster placement group for EFA types on On-Demand or
   * Spot capacity; none otherwise
   * @see https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/placement-strategies.html#placement-groups-cluster
   */
  readonly placement?: NodePlacement;

  /**
   * Size of the root EBS volume (gp3, encrypted), a whole number of GiB from 20 (the snapshot of the
   * EKS-optimized AL2023 AMIs) to 16,384. Container images of inference engines are large; with
   * `localNvmeRaid0` they land on local NVMe instead.
   *
   * @default Size.gibibytes(300)
   */
  readonly rootVolumeSize?: Size;

  /**
   * How EKS replaces nodes on an update. The default `MINIMAL` terminates a node before launching its
   * replacement, so updates need no spare capacity, which Capacity Blocks, ODCRs, placement groups and
   * scarce On-Demand types rarely have; `DEFAULT` launches replacements first.
   *
   * @default NodeUpdateStrategy.MINIMAL
   * @see https://docs.aws.amazon.com/eks/latest/APIReference/API_NodegroupUpdateConfig.html
   */
  readonly updateStrategy?: NodeUpdateStrategy;

  /**
   * Nodes updated (so unavailable) at once during an update, 1 to 100. Mutually exclusive with
   * `maxUnavailablePercentage`.
   *
   * @default 1 - unless maxUnavailablePercentage is set
   * @see https://docs.aws.amazon.com/eks/latest/userguide/managed-node-update-behavior.html
   */
  readonly maxUnavailable?: number;

  /**
   * Percentage of the nodes updated at once during an update, 1 to 100. Mutually exclusive with
   * `maxUnavailable`.
   *
   * @default - maxUnavailable is used
   */
  readonly maxUnavailablePercentage?: number;

  /**
   * EKS node auto repair: nodes whose conditions turn unhealthy (e.g. `AcceleratedHardwareReady` on
   * GPU XID, EFA or Neuron faults, reported by the EKS node monitoring agent) are rebooted or replaced.
   *
   * @default true
   * @see https://docs.aws.amazon.com/eks/latest/userguide/node-repair.html
   */
  readonly nodeAutoRepair?: boolean;

  /**
   * Assemble the instance-store NVMe drives into one RAID0 array through the AL2023 node
   * configuration (used for model files and the disk tier of the KV cache).
   *
   * @default - true when the instance type has local NVMe
   * @see https://awslabs.github.io/amazon-eks-ami/nodeadm/doc/api/
   */
  readonly localNvmeRaid0?: boolean;

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
   * Override of the EKS AMI type; it must match the accelerator vendor and CPU architecture.
   *
   * @default - the catalog's AMI type for the instance type
   */
  readonly amiType?: EksAmiType;

  /**
   * The self-referencing EFA security group to put on every interface. Share one between node
   * groups that exchange KV cache over EFA.
   *
   * @default - a new EfaSecurityGroup for this node group
   */
  readonly efaSecurityGroup?: ec2.ISecurityGroup;

  /**
   * The IAM role of the nodes.
   *
   * @default - a new role with the EKS worker, CNI and ECR read-only managed policies
   */
  readonly nodeRole?: iam.IRole;

  /**
   * The Kubernetes version of the cluster, for instance types with a minimum version.
   *
   * @default - unknown: no version check
   */
  readonly kubernetesVersion?: string;

  /**
   * Name of the node group.
   *
   * @default - generated by CloudFormation
   */
  readonly nodegroupName?: string;
}

/** Properties of an {@link AcceleratedNodeGroup}. */
export interface AcceleratedNodeGroupProps extends AcceleratedNodeGroupOptions {
  /** The cluster the nodes join. */
  readonly cluster: eks.ICluster;
}

/** Default root volume: inference images (vLLM + CUDA + EFA) are 10-30 GB compressed. */

/** Below this a root volume without local NVMe RAID0 fills with two or three engine images. */
const SMALL_ROOT_VOLUME_GIB = 100;

/** Which node group first used a shared placement group (type and AZ), to check the others against it. */
const sharedPlacementUsers = new WeakMap<object, { path: string; typeName: string; az?: string }>();

/**
 * An EKS managed node group of GPU or Trainium instances that works with EFA.
 *
 * aws-eks-v2's `Nodegroup` alone rejects or mishandles these instance types (it checks AMI types
 * against a list that does not know p5/p6/trn2, and `ec2.InstanceType` rejects `p6-b200.48xlarge`),
 * so the instance type, the network interfaces (one `efa-only` per network card, the EFA and cluster
 * security groups on each), IMDSv2, the root volume, local NVMe RAID0, placement and reservations go
 * into a `CfnLaunchTemplate`, and the node group gets an explicit AMI type and no instance types.
 *
 * @see https://docs.aws.amazon.com/eks/latest/userguide/node-efa.html
 * @see https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html
 */
export class AcceleratedNodeGroup extends Construct {
  /** The managed node group. */
  public readonly nodegroup: eks.Nodegroup;

  /** The launch template. */
  public readonly launchTemplate: ec2.CfnLaunchTemplate;

  /** The instance type. */
  public readonly instanceType: AcceleratedInstanceType;

  /** How the instances are bought. */
  public readonly capacity: NodeCapacity;

  /** The EFA security group on every interface (undefined for types without EFA). */
  public readonly efaSecurityGroup?: ec2.ISecurityGroup;

  /**
   * The placement group of the nodes: a new cluster placement group, the shared one, or undefined.
   * Pass it to another node group with `NodePlacement.sharedGroup(...)` to share it.
   */
  public readonly placementGroup?: ec2.IPlacementGroup;

  /** The Kubernetes labels of the nodes. */
  public readonly labels: { [key: string]: string };

  /** The taints of the nodes. */
  public readonly taints: eks.TaintSpec[];

  /** The IAM role of the nodes. */
  public readonly role: iam.IRole;

  constructor(scope: Construct, id: string, props: AcceleratedNodeGroupProps) {
    super(scope, id);
    checkRequired(props);
    const type = props.instanceType;
    const capacity = props.capacity ?? NodeCapacity.onDemand();
    this.instanceType = type;
    this.capacity = capacity;

    checkPurchaseOption(type, capacity);
    checkKubernetesVersion(type, props.kubernetesVersion);
    const amiType = resolveAmiType(type, props.amiType);
    // Desired 0 by default: EKS waits for a new group's nodes, and a group whose instances cannot
    // launch (short On-Demand capacity, an inactive Capacity Block) fails with AsgInstanceLaunchFailures
    // (https://docs.aws.amazon.com/eks/latest/APIReference/API_Issue.html), which rolls the whole stack
    // back, VPC and cluster included. EKS asks for desired 0 on Capacity Block groups until the block is
    // active (https://docs.aws.amazon.com/eks/latest/userguide/capacity-blocks.html) and before upgrading
    // them (https://docs.aws.amazon.com/eks/latest/userguide/capacity-blocks-mng.html).
    const desiredSize = props.desiredSize ?? 0;
    checkSizes(desiredSize, props.minSize, props.maxSize);
    const minSize = props.minSize ?? desiredSize;
    // At least 1, so that an empty group can be scaled up without a redeploy (and maxUnavailable,
    // at least 1, does not exceed it).
    const maxSize = props.maxSize ?? Math.max(desiredSize, 1);
    if (capacity.nodegroupCapacityType === eks.CapacityType.CAPACITY_BLOCK && desiredSize > 0) {
      Annotations.of(this).addWarningV2('disagg:capacityBlockDesiredSize',
        `'desiredSize' (${desiredSize}) is above 0 for Capacity Block ${capacity.reservationId}: instances cannot launch before the block `
        + 'is active, so creating the group fails (and rolls the stack back) until then, and EKS asks for desired size 0 before upgrading '
        + 'a Capacity Block group; deploy with desiredSize 0 and scale up once the block is active.');
    }
    const updateConfig = resolveUpdateConfig(props, maxSize);

    const subnets = this.resolveSubnets(props.cluster.vpc, type, capacity, props.subnets);

    // Network interfaces: EFA types get the EFA group plus the cluster group on every interface
    // (with NetworkInterfaces in a launch template, EC2 ignores top-level SecurityGroupIds and EKS
    // cannot add the cluster group itself).
    const clusterSecurityGroupId = props.cluster.clusterSecurityGroupId;
    let networkInterfaces: ec2.CfnLaunchTemplate.NetworkInterfaceProperty[] | undefined;
    if (type.supportsEfa) {
      this.efaSecurityGroup = props.efaSecurityGroup
        ?? new EfaSecurityGroup(this, 'EfaSecurityGroup', { vpc: props.cluster.vpc }).securityGroup;
      const groups = [this.efaSecurityGroup.securityGroupId, clusterSecurityGroupId];
      networkInterfaces = type.networkInterfaceLayout().map((slot) => ({
        networkCardIndex: slot.networkCardIndex,
        deviceIndex: slot.deviceIndex,
        interfaceType: slot.interfaceType,
        groups,
        deleteOnTermination: true,
        // No SubnetId (EKS sets it from the node group's subnet) and no public IP: EC2 rejects
        // AssociatePublicIpAddress on launches with several interfaces.
        description: `${type.name} card ${slot.networkCardIndex} device ${slot.deviceIndex} (${slot.interfaceType})`,
      }));
    }

    this.placementGroup = this.resolvePlacement(props.placement ?? NodePlacement.automatic(), type, capacity,
      props.cluster.vpc.selectSubnets(subnets).subnets);

    const localNvmeRaid0 = props.localNvmeRaid0 ?? type.localNvmeCount > 0;
    if (localNvmeRaid0 && type.localNvmeCount === 0) {
      throw new Error(`'localNvmeRaid0' is true but ${type.name} has no instance-store NVMe; remove the option or pick a type with local NVMe`);
    }
    const userData = nodeadmUserData({ localNvmeRaid0 });

    const rootVolumeGib = checkRootVolume(props.rootVolumeSize ?? DEFAULT_ROOT_VOLUME);
    if (rootVolumeGib < SMALL_ROOT_VOLUME_GIB && !localNvmeRaid0) {
      Annotations.of(this).addWarningV2('disagg:smallRootVolume',
        `'rootVolumeSize' (${rootVolumeGib} GiB) holds the container images without local NVMe RAID0; inference images are `
        + `10-30 GB compressed, so a node fills after a few pulls; use Size.gibibytes(${DEFAULT_ROOT_VOLUME.toGibibytes()}) or more.`);
    }
    this.launchTemplate = new ec2.CfnLaunchTemplate(this, 'LaunchTemplate', {
      launchTemplateData: {
        instanceType: type.name,
        networkInterfaces,
        // Detailed (1-minute) EC2 monitoring (Control Tower CT.EC2.PR.10); EKS allows it in a node group's
        // launch template (https://docs.aws.amazon.com/eks/latest/APIReference/API_LaunchTemplateSpecification.html).
        monitoring: { enabled: true },
        metadataOptions: {
          httpEndpoint: 'enabled',
          httpTokens: 'required',
          // 1 hop: only the node's own processes (and host-network pods such as the VPC CNI) reach IMDSv2, so
          // a worker pod cannot borrow the node role. Pods that call AWS get their own role through EKS Pod
          // Identity (the Load Balancer Controller, the Cluster Autoscaler, S3 model sources).
          // https://docs.aws.amazon.com/eks/latest/best-practices/identity-and-access-management.html#_restrict_access_to_the_instance_profile_assigned_to_the_worker_node
          httpPutResponseHopLimit: 1,
        },
        blockDeviceMappings: [{
          deviceName: '/dev/xvda', // AL2023 root device
          ebs: {
            volumeSize: rootVolumeGib,
            volumeType: 'gp3',
            encrypted: true,
            deleteOnTermination: true,
          },
        }],
        userData: userData ? Fn.base64(userData) : undefined,
        placement: this.placementGroup ? { groupName: this.placementGroup.placementGroupName } : undefined,
        instanceMarketOptions: capacity.nodegroupCapacityType === eks.CapacityType.CAPACITY_BLOCK
          ? { marketType: 'capacity-block' }
          : undefined,
        capacityReservationSpecification: capacity.reservationId
          ? { capacityReservationTarget: { capacityReservationId: capacity.reservationId } }
          : undefined,
        tagSpecifications: [{
          resourceType: 'instance',
          tags: [{ key: NodeLabels.INSTANCE_TYPE, value: type.name }],
        }],
      },
    });

    // GPU groups also carry Cluster Autoscaler's GPU label (user labels still win).
    this.labels = {
      ...(type.accelerator.vendor === AcceleratorVendor.NVIDIA ? { [CLUSTER_AUTOSCALER_GPU_LABEL]: `nvidia-${type.accelerator.name.toLowerCase()}` } : {}),
      ...acceleratedNodeLabels(type, props.poolRole, props.labels),
    };
    this.taints = acceleratedNodeTaints(type, props.taints);

    this.nodegroup = new eks.Nodegroup(this, 'Nodegroup', {
      cluster: props.cluster,
      nodegroupName: props.nodegroupName,
      // No instanceTypes: the type lives in the launch template, which keeps aws-eks-v2 from
      // checking it against its own (incomplete) list of GPU types.
      amiType: amiType as unknown as eks.NodegroupAmiType,
      capacityType: capacity.nodegroupCapacityType,
      launchTemplateSpec: {
        id: this.launchTemplate.ref,
        version: this.launchTemplate.attrLatestVersionNumber,
      },
      subnets,
      desiredSize,
      minSize,
      maxSize,
      labels: this.labels,
      taints: this.taints,
      nodeRole: props.nodeRole,
      // What a node offers, for a Cluster Autoscaler scaling the group up from zero nodes (it reads the
      // node group's tags, labels and taints through eks:DescribeNodegroup).
      tags: clusterAutoscalerResourceTags(type),
    });
    const cfnNodegroup = this.nodegroup.node.defaultChild as eks.CfnNodegroup;
    // aws-eks-v2's Nodegroup has no update strategy; its maxUnavailable props would check against the
    // same bounds, so the whole UpdateConfig is set here.
    // https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-properties-eks-nodegroup-updateconfig.html
    cfnNodegroup.updateConfig = updateConfig;
    // Node auto repair is off unless asked for (https://docs.aws.amazon.com/eks/latest/userguide/node-repair.html);
    // on accelerated groups a node with a GPU, EFA or Neuron fault otherwise keeps taking requests.
    cfnNodegroup.nodeRepairConfig = { enabled: props.nodeAutoRepair ?? true };
    this.role = this.nodegroup.role;
    if (!props.nodeRole) {
      acknowledgeNodeRole(this.role);
    }
    acknowledgeLaunchTemplateControls(this.launchTemplate, networkInterfaces !== undefined);
  }

  /** The placement group for the nodes (new, shared or none), with the checks that belong to it. */
  private resolvePlacement(placement: NodePlacement, type: AcceleratedInstanceType, capacity: NodeCapacity,
    subnets: ec2.ISubnet[]): ec2.IPlacementGroup | undefined {
    if (!(placement instanceof Object) || typeof (placement as any)._kind !== 'string') {
      throw new Error(`'placement' (${placement}) must be a NodePlacement: NodePlacement.automatic(), clusterGroup(), none() or sharedGroup(group)`);
    }
    const kind = placement._kind;
    const wanted = kind === 'cluster' || kind === 'shared' || (kind === 'automatic' && type.supportsEfa && !capacity.isReserved);
    if (!wanted) {
      return undefined;
    }
    if (capacity.isReserved) {
      Annotations.of(this).addWarningV2('disagg:placementGroupWithReservation',
        `'placement' puts the nodes in a placement group while capacity is a ${capacity.purchaseOption} (${capacity.reservationId}): `
        + 'launches fail with InsufficientInstanceCapacity unless the reservation was made in this placement group; '
        + 'use NodePlacement.none() for reservations and Capacity Blocks made outside it.');
    }
    const azs = [...new Set(subnets.map((s) => s.availabilityZone))];
    const knownAzs = azs.filter((az) => !Token.isUnresolved(az));
    if (knownAzs.length > 1) {
      throw new Error(`'placement' puts the ${type.name} nodes in a cluster placement group, which lives in one Availability Zone, but 'subnets' `
        + `selects ${knownAzs.join(', ')}; select subnets of one zone, e.g. { availabilityZones: ['${knownAzs[0]}'] }, or use NodePlacement.none()`);
    }
    if (kind !== 'shared') {
      // An L1 under the id it has always had, so existing stacks keep their placement group (an L2
      // PlacementGroup would change its logical id and replace it, rolling every node).
      const created = new ec2.CfnPlacementGroup(this, 'PlacementGroup', { strategy: 'cluster' });
      return ec2.PlacementGroup.fromPlacementGroupName(this, 'PlacementGroupRef', created.ref);
    }

    const group = placement.group!;
    if (group.strategy !== undefined && group.strategy !== ec2.PlacementGroupStrategy.CLUSTER) {
      Annotations.of(this).addWarningV2('disagg:placementGroupNotCluster',
        `'placement' shares placement group ${group.node.path} whose strategy is ${group.strategy}; EFA latency needs the cluster strategy `
        + '(ec2.PlacementGroupStrategy.CLUSTER).');
    }
    const az = azs.length === 1 && knownAzs.length === 1 ? knownAzs[0] : undefined;
    const first = sharedPlacementUsers.get(group);
    if (!first) {
      sharedPlacementUsers.set(group, { path: this.node.path, typeName: type.name, az });
      return group;
    }
    if (first.az !== undefined && az !== undefined && first.az !== az) {
      throw new Error(`'placement' shares placement group ${group.node.path} with ${first.path}, whose nodes are in ${first.az}, but this node `
        + `group's subnets are in ${az}; a cluster placement group lives in one zone: select a subnet in ${first.az} ('subnets')`);
    }
    // EC2 recommends one instance type per cluster placement group, launched in one request:
    // https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/placement-strategies.html#placement-groups-cluster
    if (first.typeName !== type.name) {
      Annotations.of(this).addWarningV2('disagg:placementGroupMixedTypes',
        `'placement' shares placement group ${group.node.path} between ${first.typeName} (${first.path}) and ${type.name}; EC2 recommends one `
        + 'instance type per cluster placement group, and launches of a second type are likelier to fail with InsufficientInstanceCapacity.');
    }
    return group;
  }

  /** Picks (or checks) the subnets: one subnet in one AZ for EFA, matching a known reservation AZ. */
  private resolveSubnets(vpc: ec2.IVpc, type: AcceleratedInstanceType, capacity: NodeCapacity,
    requested: ec2.SubnetSelection | undefined): ec2.SubnetSelection {
    const reservationAz = capacity.availabilityZone;
    if (requested) {
      const selected = vpc.selectSubnets(requested);
      if (type.supportsEfa && selected.subnets.length !== 1) {
        const azs = selected.subnets.map((s) => describeAz(s.availabilityZone));
        throw new Error(`'subnets' selects ${selected.subnets.length} subnets (AZs: ${azs.join(', ')}) for the EFA node group of ${type.name}; `
          + 'EFA traffic does not cross Availability Zones, so select exactly one subnet, e.g. { subnets: [vpc.privateSubnets[0]] }');
      }
      if (reservationAz !== undefined && !Token.isUnresolved(reservationAz)) {
        for (const subnet of selected.subnets) {
          if (!Token.isUnresolved(subnet.availabilityZone) && subnet.availabilityZone !== reservationAz) {
            throw new Error(`'subnets' selects subnet ${subnet.node.path} in ${subnet.availabilityZone}, but capacity ${capacity.reservationId} `
              + `is reserved in ${reservationAz}; select a subnet in ${reservationAz}`);
          }
        }
      }
      return requested;
    }

    const candidates = vpc.privateSubnets.length > 0 ? vpc.privateSubnets : vpc.isolatedSubnets;
    if (candidates.length === 0) {
      throw new Error(`the VPC of the cluster has no private subnets for the ${type.name} node group; add private subnets or pass 'subnets'`);
    }
    let pool = candidates;
    if (reservationAz !== undefined && !Token.isUnresolved(reservationAz)) {
      const known = candidates.filter((s) => !Token.isUnresolved(s.availabilityZone));
      if (known.length === candidates.length) {
        pool = candidates.filter((s) => s.availabilityZone === reservationAz);
        if (pool.length === 0) {
          throw new Error(`capacity ${capacity.reservationId} is reserved in ${reservationAz}, but the VPC's private subnets are in `
            + `${[...new Set(known.map((s) => s.availabilityZone))].join(', ')}; pass 'subnets' with a subnet in ${reservationAz} or create the reservation in one of those zones`);
        }
      } else {
        Annotations.of(this).addWarningV2('disagg:reservationAzUnverified',
          `capacity ${capacity.reservationId} is reserved in ${reservationAz}, but the VPC's Availability Zones are not known at synthesis `
          + '(environment-agnostic stack); pass \'subnets\' with the subnet in that zone.');
      }
    }
    if (!type.supportsEfa) {
      return { subnets: pool };
    }
    return { subnets: [pool[0]] };
  }
}

/**
 * Required props checked by hand: from JavaScript (and jsii languages' null) a missing prop otherwise
 * surfaces as a TypeError deep inside, naming nothing.
 */
function checkRequired(props: AcceleratedNodeGroupProps): void {
  if (props === undefined || props === null) {
    throw new Error('AcceleratedNodeGroup needs props: { cluster, instanceType: AcceleratedInstanceType.P5EN_48XLARGE, ... }');
  }
  const type = props.instanceType as unknown;
  if (type === undefined || type === null || typeof type !== 'object' || typeof (type as any).networkInterfaceLayout !== 'function') {
    const received = typeof type === 'string' ? `'${type}'` : String(type);
    const hint = typeof type === 'string'
      ? `AcceleratedInstanceType.fromName('${type}')`
      : 'AcceleratedInstanceType.P5EN_48XLARGE (or P5_48XLARGE, P6_B200_48XLARGE, TRN2_48XLARGE, ...)';
    throw new Error(`'instanceType' (${received}) must be an AcceleratedInstanceType from the catalog: use ${hint}, `
      + 'AcceleratedInstanceType.fromName(\'p5en.48xlarge\') or AcceleratedInstanceType.of({...}) for a type the catalog lacks');
  }
  const cluster = props.cluster as unknown;
  if (cluster === undefined || cluster === null || typeof (cluster as any).clusterName !== 'string') {
    throw new Error(`'cluster' (${cluster}) must be an eks.ICluster (aws-eks-v2), e.g. inferenceCluster.cluster or eks.Cluster.fromClusterAttributes(...); `
      + 'or add the group with InferenceCluster.addAcceleratedNodeGroup(id, options), which passes it');
  }
  if (props.capacity !== undefined && props.capacity !== null && typeof (props.capacity as any).purchaseOption !== 'string') {
    throw new Error(`'capacity' (${props.capacity}) must be a NodeCapacity: NodeCapacity.onDemand(), spot(), capacityReservation('cr-...') or capacityBlock('cr-...')`);
  }
}


/**
 * The node group's UpdateConfig. MINIMAL and one node at a time by default: the DEFAULT strategy
 * first launches up to twice the group's Availability Zones (or maxUnavailable) extra instances
 * (https://docs.aws.amazon.com/eks/latest/userguide/managed-node-update-behavior.html), which a full
 * Capacity Block, ODCR or cluster placement group cannot supply; MINIMAL terminates old instances
 * first and is meant for capacity-constrained accelerators
 * (https://docs.aws.amazon.com/eks/latest/APIReference/API_NodegroupUpdateConfig.html: maxUnavailable
 * >= 1 and at most 100, percentage 1-100, strategy DEFAULT | MINIMAL).
 */
function resolveUpdateConfig(props: AcceleratedNodeGroupOptions, maxSize: number): eks.CfnNodegroup.UpdateConfigProperty {
  const strategy = props.updateStrategy ?? NodeUpdateStrategy.MINIMAL;
  if (!Object.values(NodeUpdateStrategy).includes(strategy)) {
    throw new Error(`'updateStrategy' (${strategy}) must be NodeUpdateStrategy.MINIMAL or NodeUpdateStrategy.DEFAULT`);
  }
  const count = props.maxUnavailable;
  const percentage = props.maxUnavailablePercentage;
  if (count !== undefined && percentage !== undefined) {
    throw new Error(`'maxUnavailable' (${count}) and 'maxUnavailablePercentage' (${percentage}) exclude each other; keep one`);
  }
  if (percentage !== undefined) {
    if (!(Number.isInteger(percentage) && percentage >= 1 && percentage <= 100)) {
      throw new Error(`'maxUnavailablePercentage' (${percentage}) must be a whole number from 1 to 100; use e.g. 25`);
    }
    return { maxUnavailablePercentage: percentage, updateStrategy: strategy };
  }
  const maxUnavailable = count ?? 1;
  if (!(Number.isInteger(maxUnavailable) && maxUnavailable >= 1 && maxUnavailable <= 100)) {
    throw new Error(`'maxUnavailable' (${maxUnavailable}) must be a whole number from 1 to 100; use 1 to update one node at a time`);
  }
  if (maxUnavailable > maxSize) {
    throw new Error(`'maxUnavailable' (${maxUnavailable}) exceeds 'maxSize' (${maxSize}); use at most ${maxSize}, or raise maxSize`);
  }
  return { maxUnavailable, updateStrategy: strategy };
}

function describeAz(az: string): string {
  return Token.isUnresolved(az) ? '(resolved at deploy time)' : az;
}

function checkPurchaseOption(type: AcceleratedInstanceType, capacity: NodeCapacity): void {
  if (!type.supportsPurchaseOption(capacity.purchaseOption)) {
    const allowed = type.purchaseOptions;
    const hint = allowed.length === 1 && allowed[0] === PurchaseOption.CAPACITY_BLOCK
      ? 'buy a Capacity Block for ML and use NodeCapacity.capacityBlock(\'cr-...\')'
      : `use one of NodeCapacity.${allowed.map(factoryName).join('/NodeCapacity.')}`;
    throw new Error(`'capacity' (${capacity.purchaseOption}) is not available for ${type.name}, which can be bought as: ${allowed.join(', ')}; ${hint}`);
  }
}

function factoryName(option: string): string {
  switch (option) {
    case 'on-demand': return 'onDemand()';
    case 'spot': return 'spot()';
    case 'capacity-reservation': return "capacityReservation('cr-...')";
    default: return "capacityBlock('cr-...')";
  }
}

function checkKubernetesVersion(type: AcceleratedInstanceType, version: string | undefined): void {
  const min = type.minKubernetesVersion;
  if (!min || !version || Token.isUnresolved(version)) {
    return;
  }
  const [aMaj, aMin] = version.split('.').map(Number);
  const [bMaj, bMin] = min.split('.').map(Number);
  if (aMaj < bMaj || (aMaj === bMaj && aMin < bMin)) {
    throw new Error(`'kubernetesVersion' (${version}) is too old for ${type.name}, which EKS supports from Kubernetes ${min}; use KubernetesVersion.V${min.replace('.', '_')} or later`);
  }
}

function checkSizes(desired: number, min: number | undefined, max: number | undefined): void {
  if (!Number.isInteger(desired) || desired < 0) {
    throw new Error(`'desiredSize' (${desired}) must be a whole number >= 0`);
  }
  if (min !== undefined && !(Number.isInteger(min) && min >= 0)) {
    throw new Error(`'minSize' (${min}) must be a whole number >= 0`);
  }
  if (max !== undefined && !(Number.isInteger(max) && max >= 1)) {
    throw new Error(`'maxSize' (${max}) must be a whole number >= 1; a group that may not grow cannot be scaled up later`);
  }
  if (min !== undefined && min > desired) {
    throw new Error(`'minSize' (${min}) must not exceed 'desiredSize' (${desired}); lower minSize or raise desiredSize`);
  }
  if (max !== undefined && max < desired) {
    throw new Error(`'maxSize' (${max}) must be at least 'desiredSize' (${desired}); raise maxSize or lower desiredSize`);
  }
}

/** The AMI type: the catalog's, or an override that must match vendor and architecture. */
function resolveAmiType(type: AcceleratedInstanceType, override: EksAmiType | undefined): EksAmiType {
  if (override === undefined) {
    return type.amiType;
  }
  const wantNeuron = type.isNeuron;
  const isNeuronAmi = override.includes('NEURON');
  const isNvidiaAmi = override.includes('NVIDIA');
  const isArmAmi = override.includes('ARM_64');
  const vendorOk = wantNeuron ? isNeuronAmi : (type.accelerator.vendor === AcceleratorVendor.NVIDIA ? isNvidiaAmi : true);
  const archOk = (type.architecture === CpuArchitecture.ARM_64) === isArmAmi;
  if (!vendorOk || !archOk) {
    throw new Error(`'amiType' (${override}) cannot drive ${type.name} (${type.accelerator.name}, ${type.architecture}): `
      + `its drivers are on ${type.amiType}; remove 'amiType' to use it`);
  }
  return override;
}

