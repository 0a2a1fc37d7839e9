import { Token } from 'aws-cdk-lib';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as eks from 'aws-cdk-lib/aws-eks-v2';
import { PurchaseOption } from '../catalog';

/**
 * Options for capacity that was reserved ahead of time (an On-Demand Capacity Reservation or a
 * Capacity Block for ML).
 */
export interface ReservedCapacityOptions {
  /**
   * The Availability Zone the reservation was made in (e.g. `us-east-2a`). When given, the node
   * group places its nodes in a subnet of this zone and rejects subnets of other zones.
   *
   * @default - unknown: the node group cannot check that its subnet is in the reservation's zone
   * @see https://docs.aws.amazon.com/eks/latest/userguide/capacity-blocks-mng.html
   */
  readonly availabilityZone?: string;
}

/**
 * Where the instances of an accelerated node group are placed: in a cluster placement group of their
 * own, in one shared with another node group, or in none.
 *
 * A cluster placement group packs instances close together in one Availability Zone for the lowest
 * network latency (EFA). Prefill and decode groups on the same instance type exchange KV cache, so
 * putting both in one group keeps that traffic inside it: create one `ec2.PlacementGroup` with the
 * `CLUSTER` strategy and pass `NodePlacement.sharedGroup(group)` to both node groups.
 *
 * @example
 * NodePlacement.sharedGroup(new ec2.PlacementGroup(stack, 'KvPlacement', { strategy: ec2.PlacementGroupStrategy.CLUSTER }));
 * @see https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/placement-strategies.html#placement-groups-cluster
 */
export class NodePlacement {
  /**
   * A new cluster placement group for EFA types on On-Demand or Spot capacity; no placement group for
   * types without EFA and for reservations and Capacity Blocks (those can only launch into a placement
   * group they were reserved in).
   */
  public static automatic(): NodePlacement {
    return new NodePlacement('automatic');
  }

  /** A new cluster placement group for this node group, whatever the type and capacity. */
  public static clusterGroup(): NodePlacement {
    return new NodePlacement('cluster');
  }

  /** No placement group. */
  public static none(): NodePlacement {
    return new NodePlacement('none');
  }

  /**
   * An existing placement group, shared with other node groups (e.g. the prefill and decode groups
   * of one P/D pair on the same instance type). The node groups that share it must place their
   * nodes in the same Availability Zone.
   *
   * @param group a placement group with the `CLUSTER` strategy
   */
  public static sharedGroup(group: ec2.IPlacementGroup): NodePlacement {
    if (group === undefined || group === null || typeof (group as any).placementGroupName !== 'string') {
      throw new Error(`NodePlacement.sharedGroup: 'group' (${group}) must be an ec2.IPlacementGroup, e.g. new ec2.PlacementGroup(scope, 'Pd', { strategy: ec2.PlacementGroupStrategy.CLUSTER })`);
    }
    return new NodePlacement('shared', group);
  }

  /** @internal */
  public readonly _kind: 'automatic' | 'cluster' | 'none' | 'shared';

  /** The shared placement group, for `sharedGroup`. */
  public readonly group?: ec2.IPlacementGroup;

  private constructor(kind: 'automatic' | 'cluster' | 'none' | 'shared', group?: ec2.IPlacementGroup) {
    this._kind = kind;
    this.group = group;
  }
}

/**
 * How the instances of an accelerated node group are bought.
 *
 * @example
 * NodeCapacity.onDemand();
 * NodeCapacity.capacityBlock('cr-0123456789abcdef0', { availabilityZone: 'us-east-2b' });
 */
export class NodeCapacity {
  /** Plain On-Demand instances. */
  public static onDemand(): NodeCapacity {
    return new NodeCapacity(PurchaseOption.ON_DEMAND);
  }

  /**
   * Spot instances (only for instance types whose catalog entry allows Spot).
   *
   * @see https://docs.aws.amazon.com/eks/latest/userguide/managed-node-groups.html#managed-node-group-capacity-types
   */
  public static spot(): NodeCapacity {
    return new NodeCapacity(PurchaseOption.SPOT);
  }

  /**
   * An On-Demand Capacity Reservation (ODCR), targeted by id.
   *
   * @param reservationId the reservation id, `cr-` followed by hex digits
   * @see https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-reservations-using.html
   */
  public static capacityReservation(reservationId: string, options: ReservedCapacityOptions = {}): NodeCapacity {
    return new NodeCapacity(PurchaseOption.CAPACITY_RESERVATION, checkReservationId(reservationId), options.availabilityZone);
  }

  /**
   * A Capacity Block for ML, targeted by its reservation id. The launch template gets the
   * `capacity-block` market type and the node group the `CAPACITY_BLOCK` capacity type.
   *
   * @param reservationId the Capacity Block's reservation id, `cr-` followed by hex digits
   * @see https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-capacity-blocks.html
   */
  public static capacityBlock(reservationId: string, options: ReservedCapacityOptions = {}): NodeCapacity {
    return new NodeCapacity(PurchaseOption.CAPACITY_BLOCK, checkReservationId(reservationId), options.availabilityZone);
  }

  /** How the instances are bought. */
  public readonly purchaseOption: PurchaseOption;

  /** The reservation that is targeted, for reservations and Capacity Blocks. */
  public readonly reservationId?: string;

  /** The Availability Zone of the reservation, when known. */
  public readonly availabilityZone?: string;

  private constructor(purchaseOption: PurchaseOption, reservationId?: string, availabilityZone?: string) {
    this.purchaseOption = purchaseOption;
    this.reservationId = reservationId;
    this.availabilityZone = availabilityZone;
  }

  /** True for On-Demand Capacity Reservations and Capacity Blocks. */
  public get isReserved(): boolean {
    return this.reservationId !== undefined;
  }

  /** The managed node group capacity type that matches this purchase option. */
  public get nodegroupCapacityType(): eks.CapacityType {
    switch (this.purchaseOption) {
      case PurchaseOption.SPOT: return eks.CapacityType.SPOT;
      case PurchaseOption.CAPACITY_BLOCK: return eks.CapacityType.CAPACITY_BLOCK;
      // A targeted ODCR is consumed by ON_DEMAND launches.
      default: return eks.CapacityType.ON_DEMAND;
    }
  }
}

function checkReservationId(reservationId: string): string {
  // EC2 reservation ids are 'cr-' plus 17 hex digits (older ones 8).
  if (!Token.isUnresolved(reservationId) && !/^cr-[0-9a-f]{8,17}$/.test(reservationId)) {
    throw new Error(`'reservationId' (${reservationId}) is not an EC2 capacity reservation id; pass the id shown by 'aws ec2 describe-capacity-reservations', e.g. 'cr-0123456789abcdef0'`);
  }
  return reservationId;
}
