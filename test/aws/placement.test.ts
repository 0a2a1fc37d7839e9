import { Annotations, Match, Template } from 'aws-cdk-lib/assertions';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import { fixture } from './util';
import { AcceleratedNodeGroup, NodeCapacity, NodePlacement } from '../../src/aws';
import { AcceleratedInstanceType } from '../../src/catalog';
import { noEfaInstanceType } from '../k8s/util';

const P5EN = AcceleratedInstanceType.P5EN_48XLARGE;

function placementOf(template: Template, groupPath: string): any {
  const lt = Object.entries(template.findResources('AWS::EC2::LaunchTemplate')).find(([id]) => id.startsWith(groupPath))!;
  return (lt[1] as any).Properties.LaunchTemplateData.Placement;
}

describe('placement groups', () => {
  test('a prefill and a decode group can share one cluster placement group', () => {
    // GIVEN one cluster placement group
    const fx = fixture(true);
    const shared = new ec2.PlacementGroup(fx.stack, 'KvPlacement', { strategy: ec2.PlacementGroupStrategy.CLUSTER });
    // WHEN both groups use it
    const prefill = new AcceleratedNodeGroup(fx.stack, 'Prefill', {
      cluster: fx.cluster, instanceType: P5EN, poolRole: 'prefill', placement: NodePlacement.sharedGroup(shared),
    });
    new AcceleratedNodeGroup(fx.stack, 'Decode', {
      cluster: fx.cluster, instanceType: P5EN, poolRole: 'decode', placement: NodePlacement.sharedGroup(prefill.placementGroup!),
    });
    // THEN there is one placement group and both launch templates name it
    const template = Template.fromStack(fx.stack);
    template.resourceCountIs('AWS::EC2::PlacementGroup', 1);
    const groupId = Object.keys(template.findResources('AWS::EC2::PlacementGroup'))[0];
    const expected = { GroupName: { 'Fn::GetAtt': [groupId, 'GroupName'] } };
    expect(placementOf(template, 'Prefill')).toEqual(expected);
    expect(placementOf(template, 'Decode')).toEqual(expected);
    Annotations.fromStack(fx.stack).hasNoWarning('*', Match.stringLikeRegexp('placementGroup'));
  });

  test('sharing across zones is an error that names the zone to use', () => {
    // GIVEN a shared group used from us-east-2a
    const fx = fixture(true);
    const shared = new ec2.PlacementGroup(fx.stack, 'KvPlacement', { strategy: ec2.PlacementGroupStrategy.CLUSTER });
    const inZone = (az: string) => ({ subnets: fx.vpc.privateSubnets.filter((s) => s.availabilityZone === az) });
    new AcceleratedNodeGroup(fx.stack, 'Prefill', {
      cluster: fx.cluster, instanceType: P5EN, placement: NodePlacement.sharedGroup(shared), subnets: inZone('us-east-2a'),
    });
    // WHEN a second group selects us-east-2b THEN
    expect(() => new AcceleratedNodeGroup(fx.stack, 'Decode', {
      cluster: fx.cluster, instanceType: P5EN, placement: NodePlacement.sharedGroup(shared), subnets: inZone('us-east-2b'),
    })).toThrow(/'placement' shares placement group Test\/KvPlacement with Test\/Prefill, whose nodes are in us-east-2a, but .* us-east-2b.*select a subnet in us-east-2a/);
  });

  test('sharing between instance types warns', () => {
    // GIVEN / WHEN
    const fx = fixture(true);
    const shared = new ec2.PlacementGroup(fx.stack, 'KvPlacement', { strategy: ec2.PlacementGroupStrategy.CLUSTER });
    new AcceleratedNodeGroup(fx.stack, 'Prefill', { cluster: fx.cluster, instanceType: P5EN, placement: NodePlacement.sharedGroup(shared) });
    new AcceleratedNodeGroup(fx.stack, 'Decode', {
      cluster: fx.cluster, instanceType: AcceleratedInstanceType.P5_48XLARGE, placement: NodePlacement.sharedGroup(shared),
    });
    // THEN
    Annotations.fromStack(fx.stack).hasWarning('/Test/Decode', Match.stringLikeRegexp('p5en.48xlarge.*p5.48xlarge.*disagg:placementGroupMixedTypes'));
  });

  test('a shared group that is not a cluster group warns', () => {
    // GIVEN / WHEN
    const fx = fixture(true);
    const spread = new ec2.PlacementGroup(fx.stack, 'Spread', { strategy: ec2.PlacementGroupStrategy.SPREAD });
    new AcceleratedNodeGroup(fx.stack, 'Gpu', { cluster: fx.cluster, instanceType: P5EN, placement: NodePlacement.sharedGroup(spread) });
    // THEN
    Annotations.fromStack(fx.stack).hasWarning('/Test/Gpu', Match.stringLikeRegexp('disagg:placementGroupNotCluster'));
  });

  test('a shared group with a reservation warns as a new one does', () => {
    // GIVEN / WHEN
    const fx = fixture(true);
    const shared = new ec2.PlacementGroup(fx.stack, 'KvPlacement', { strategy: ec2.PlacementGroupStrategy.CLUSTER });
    new AcceleratedNodeGroup(fx.stack, 'Gpu', {
      cluster: fx.cluster, instanceType: P5EN, capacity: NodeCapacity.capacityBlock('cr-0123456789abcdef0'), placement: NodePlacement.sharedGroup(shared),
    });
    // THEN
    Annotations.fromStack(fx.stack).hasWarning('/Test/Gpu', Match.stringLikeRegexp('disagg:placementGroupWithReservation'));
  });

  test('a cluster group over subnets of two zones is an error', () => {
    // GIVEN a type without EFA (every private subnet by default) WHEN forced into a cluster group THEN
    const fx = fixture(true);
    expect(() => new AcceleratedNodeGroup(fx.stack, 'Gpu', {
      cluster: fx.cluster, instanceType: noEfaInstanceType(), placement: NodePlacement.clusterGroup(),
    })).toThrow(/'placement' puts the test-noefa.48xlarge nodes in a cluster placement group, which lives in one Availability Zone, but 'subnets' selects us-east-2a, us-east-2b/);
  });

  test('sharedGroup rejects what is not a placement group', () => {
    // GIVEN / WHEN / THEN
    expect(() => NodePlacement.sharedGroup(undefined as any)).toThrow(/'group' \(undefined\) must be an ec2.IPlacementGroup/);
  });
});

describe('zones of non-EFA groups', () => {
  test('a known reservation zone narrows the default subnets to that zone', () => {
    // GIVEN / WHEN
    const fx = fixture(true);
    new AcceleratedNodeGroup(fx.stack, 'Gpu', {
      cluster: fx.cluster,
      instanceType: noEfaInstanceType(),
      capacity: NodeCapacity.capacityReservation('cr-0123456789abcdef0', { availabilityZone: 'us-east-2b' }),
    });
    // THEN the node group gets the one private subnet of us-east-2b
    const inB = fx.vpc.privateSubnets.filter((s) => s.availabilityZone === 'us-east-2b').map((s) => fx.stack.resolve(s.subnetId));
    Template.fromStack(fx.stack).hasResourceProperties('AWS::EKS::Nodegroup', { Subnets: inB });
  });
});
