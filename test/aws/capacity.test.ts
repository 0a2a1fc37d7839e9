import { Annotations, Match } from 'aws-cdk-lib/assertions';
import { onlyResource, synthGroup } from './util';
import { NodeCapacity, NodePlacement } from '../../src/aws';
import { AcceleratedInstanceType } from '../../src/catalog';

const P5EN = AcceleratedInstanceType.P5EN_48XLARGE;
const CR = 'cr-0123456789abcdef0';

function launchData(template: any): any {
  return onlyResource(template, 'AWS::EC2::LaunchTemplate').Properties.LaunchTemplateData;
}

describe('capacity', () => {
  test('on-demand: cluster placement group, no market options, ON_DEMAND node group', () => {
    // GIVEN / WHEN
    const { template } = synthGroup({ instanceType: P5EN });
    // THEN
    template.hasResourceProperties('AWS::EC2::PlacementGroup', { Strategy: 'cluster' });
    const data = launchData(template);
    const groupId = Object.keys(template.findResources('AWS::EC2::PlacementGroup'))[0];
    expect(data.Placement).toEqual({ GroupName: { Ref: groupId } });
    expect(data.InstanceMarketOptions).toBeUndefined();
    expect(data.CapacityReservationSpecification).toBeUndefined();
    template.hasResourceProperties('AWS::EKS::Nodegroup', { CapacityType: 'ON_DEMAND' });
  });

  test('placement group can be switched off', () => {
    // GIVEN / WHEN
    const { template } = synthGroup({ instanceType: P5EN, placement: NodePlacement.none() });
    // THEN
    template.resourceCountIs('AWS::EC2::PlacementGroup', 0);
    expect(launchData(template).Placement).toBeUndefined();
  });

  test('capacity block: capacity-block market type, reservation target, CAPACITY_BLOCK node group, no placement group', () => {
    // GIVEN / WHEN
    const { template } = synthGroup({ instanceType: P5EN, capacity: NodeCapacity.capacityBlock(CR) });
    // THEN
    const data = launchData(template);
    expect(data.InstanceMarketOptions).toEqual({ MarketType: 'capacity-block' });
    expect(data.CapacityReservationSpecification).toEqual({ CapacityReservationTarget: { CapacityReservationId: CR } });
    template.hasResourceProperties('AWS::EKS::Nodegroup', { CapacityType: 'CAPACITY_BLOCK' });
    template.resourceCountIs('AWS::EC2::PlacementGroup', 0);
  });

  test('on-demand capacity reservation: reservation target with ON_DEMAND and no market options', () => {
    // GIVEN / WHEN
    const { template } = synthGroup({ instanceType: P5EN, capacity: NodeCapacity.capacityReservation(CR) });
    // THEN
    const data = launchData(template);
    expect(data.InstanceMarketOptions).toBeUndefined();
    expect(data.CapacityReservationSpecification).toEqual({ CapacityReservationTarget: { CapacityReservationId: CR } });
    template.hasResourceProperties('AWS::EKS::Nodegroup', { CapacityType: 'ON_DEMAND' });
  });

  test('spot: SPOT node group and no market options in the launch template (EKS sets them)', () => {
    // GIVEN / WHEN
    const { template } = synthGroup({ instanceType: AcceleratedInstanceType.P5_48XLARGE, capacity: NodeCapacity.spot() });
    // THEN
    template.hasResourceProperties('AWS::EKS::Nodegroup', { CapacityType: 'SPOT' });
    expect(launchData(template).InstanceMarketOptions).toBeUndefined();
  });

  test('forcing a placement group onto a reservation warns with a stable id', () => {
    // GIVEN / WHEN
    const capacity = NodeCapacity.capacityReservation(CR);
    const { fx, template } = synthGroup({ instanceType: P5EN, capacity, placement: NodePlacement.clusterGroup() });
    // THEN
    template.resourceCountIs('AWS::EC2::PlacementGroup', 1);
    Annotations.fromStack(fx.stack).hasWarning('/Test/Gpu', Match.stringLikeRegexp('disagg:placementGroupWithReservation'));
  });

  test('no placement-group warning on the default path', () => {
    // GIVEN / WHEN
    const { fx } = synthGroup({ instanceType: P5EN, capacity: NodeCapacity.capacityBlock(CR) });
    // THEN
    Annotations.fromStack(fx.stack).hasNoWarning('*', Match.stringLikeRegexp('placementGroupWithReservation'));
  });
});

describe('subnets and zones', () => {
  test('an EFA group defaults to exactly one private subnet', () => {
    // GIVEN / WHEN
    const { template, fx } = synthGroup({ instanceType: P5EN });
    // THEN
    const subnets = onlyResource(template, 'AWS::EKS::Nodegroup').Properties.Subnets;
    expect(subnets).toEqual([{ Ref: fx.stack.getLogicalId(fx.vpc.privateSubnets[0].node.defaultChild as any) }]);
  });

  test('a reservation with a known AZ picks the private subnet of that AZ', () => {
    // GIVEN / WHEN
    const { template, fx } = synthGroup({
      instanceType: P5EN,
      capacity: NodeCapacity.capacityBlock(CR, { availabilityZone: 'us-east-2b' }),
    }, true);
    // THEN
    const inB = fx.vpc.privateSubnets.find((s) => s.availabilityZone === 'us-east-2b')!;
    const subnets = onlyResource(template, 'AWS::EKS::Nodegroup').Properties.Subnets;
    expect(subnets).toEqual([{ Ref: fx.stack.getLogicalId(inB.node.defaultChild as any) }]);
  });

  test('the EFA security group allows all traffic to and from itself only', () => {
    // GIVEN / WHEN
    const { template } = synthGroup({ instanceType: P5EN });
    // THEN
    const sgId = Object.keys(template.findResources('AWS::EC2::SecurityGroup'))[0];
    template.hasResourceProperties('AWS::EC2::SecurityGroupIngress', {
      IpProtocol: '-1', GroupId: { 'Fn::GetAtt': [sgId, 'GroupId'] }, SourceSecurityGroupId: { 'Fn::GetAtt': [sgId, 'GroupId'] },
    });
    template.hasResourceProperties('AWS::EC2::SecurityGroupEgress', {
      IpProtocol: '-1', GroupId: { 'Fn::GetAtt': [sgId, 'GroupId'] }, DestinationSecurityGroupId: { 'Fn::GetAtt': [sgId, 'GroupId'] },
    });
    const sg = template.findResources('AWS::EC2::SecurityGroup')[sgId].Properties;
    // No 0.0.0.0/0 egress: only the self rule.
    expect(JSON.stringify(sg.SecurityGroupEgress ?? [])).not.toContain('0.0.0.0/0');
  });
});

describe('labels and taints', () => {
  test('GPU nodes carry instance, accelerator and pool labels and the nvidia.com/gpu taint', () => {
    // GIVEN / WHEN
    const { template } = synthGroup({ instanceType: P5EN, poolRole: 'decode' });
    // THEN
    template.hasResourceProperties('AWS::EKS::Nodegroup', {
      Labels: Match.objectLike({
        'disagg.dev/instance-type': 'p5en.48xlarge',
        'disagg.dev/accelerator': P5EN.accelerator.name.toLowerCase(),
        'disagg.dev/accelerator-vendor': 'nvidia',
        'disagg.dev/pool-role': 'decode',
        'nvidia.com/gpu.present': 'true',
        'vpc.amazonaws.com/efa.present': 'true',
      }),
      Taints: [{ Key: 'nvidia.com/gpu', Value: 'true', Effect: 'NO_SCHEDULE' }],
    });
  });

  test('Trainium nodes carry the aws.amazon.com/neuron taint', () => {
    // GIVEN / WHEN
    const { template } = synthGroup({ instanceType: AcceleratedInstanceType.TRN2_48XLARGE });
    // THEN
    template.hasResourceProperties('AWS::EKS::Nodegroup', {
      Labels: Match.objectLike({ 'disagg.dev/accelerator-vendor': 'aws', 'aws.amazon.com/neuron.present': 'true' }),
      Taints: [{ Key: 'aws.amazon.com/neuron', Value: 'true', Effect: 'NO_SCHEDULE' }],
    });
  });
});
