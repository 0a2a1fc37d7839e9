import { Size } from 'aws-cdk-lib';
import { Annotations, Match } from 'aws-cdk-lib/assertions';
import { onlyResource, synthGroup } from './util';
import { NodeCapacity, NodeUpdateStrategy } from '../../src/aws';
import { AcceleratedInstanceType } from '../../src/catalog';

const P5EN = AcceleratedInstanceType.P5EN_48XLARGE;
const CR = 'cr-0123456789abcdef0';

function nodegroup(template: any): any {
  return onlyResource(template, 'AWS::EKS::Nodegroup').Properties;
}

describe('sizes that do not roll a stack back over short capacity', () => {
  test('a group starts empty and can be scaled to 1 without a redeploy', () => {
    // GIVEN / WHEN
    const { template } = synthGroup({ instanceType: P5EN });
    // THEN
    expect(nodegroup(template).ScalingConfig).toEqual({ DesiredSize: 0, MinSize: 0, MaxSize: 1 });
  });

  test('an explicit size is kept, with min and max at it', () => {
    // GIVEN / WHEN
    const { template } = synthGroup({ instanceType: P5EN, desiredSize: 2 });
    // THEN
    expect(nodegroup(template).ScalingConfig).toEqual({ DesiredSize: 2, MinSize: 2, MaxSize: 2 });
  });

  test('a Capacity Block group with nodes warns that the block must be active', () => {
    // GIVEN / WHEN
    const { fx } = synthGroup({ instanceType: P5EN, capacity: NodeCapacity.capacityBlock(CR), desiredSize: 2 });
    // THEN
    Annotations.fromStack(fx.stack).hasWarning('/Test/Gpu', Match.stringLikeRegexp("'desiredSize' \\(2\\).*deploy with desiredSize 0.*disagg:capacityBlockDesiredSize"));
  });

  test('a Capacity Block group at the default size does not warn', () => {
    // GIVEN / WHEN
    const { fx, template } = synthGroup({ instanceType: P5EN, capacity: NodeCapacity.capacityBlock(CR) });
    // THEN
    expect(nodegroup(template).ScalingConfig.DesiredSize).toBe(0);
    Annotations.fromStack(fx.stack).hasNoWarning('*', Match.stringLikeRegexp('capacityBlockDesiredSize'));
  });
});

describe('updates that need no spare capacity', () => {
  test('MINIMAL strategy, one node at a time, by default', () => {
    // GIVEN / WHEN
    const { template } = synthGroup({ instanceType: P5EN, desiredSize: 2 });
    // THEN
    expect(nodegroup(template).UpdateConfig).toEqual({ MaxUnavailable: 1, UpdateStrategy: 'MINIMAL' });
  });

  test('DEFAULT strategy and a percentage when asked for', () => {
    // GIVEN / WHEN
    const { template } = synthGroup({
      instanceType: P5EN, desiredSize: 4, updateStrategy: NodeUpdateStrategy.DEFAULT, maxUnavailablePercentage: 50,
    });
    // THEN
    expect(nodegroup(template).UpdateConfig).toEqual({ MaxUnavailablePercentage: 50, UpdateStrategy: 'DEFAULT' });
  });

  test('several nodes at a time', () => {
    // GIVEN / WHEN
    const { template } = synthGroup({ instanceType: P5EN, desiredSize: 4, maxUnavailable: 2 });
    // THEN
    expect(nodegroup(template).UpdateConfig).toEqual({ MaxUnavailable: 2, UpdateStrategy: 'MINIMAL' });
  });
});

describe('node health', () => {
  test('node auto repair is on by default', () => {
    // GIVEN / WHEN
    const { template } = synthGroup({ instanceType: P5EN });
    // THEN
    template.hasResourceProperties('AWS::EKS::Nodegroup', { NodeRepairConfig: { Enabled: true } });
  });

  test('node auto repair can be switched off', () => {
    // GIVEN / WHEN
    const { template } = synthGroup({ instanceType: P5EN, nodeAutoRepair: false });
    // THEN
    template.hasResourceProperties('AWS::EKS::Nodegroup', { NodeRepairConfig: { Enabled: false } });
  });
});

describe('root volume bounds', () => {
  test.each([20, 16_384])('%i GiB is accepted', (gib) => {
    // GIVEN / WHEN
    const { template } = synthGroup({ instanceType: P5EN, rootVolumeSize: Size.gibibytes(gib) });
    // THEN
    const data = onlyResource(template, 'AWS::EC2::LaunchTemplate').Properties.LaunchTemplateData;
    expect(data.BlockDeviceMappings[0].Ebs.VolumeSize).toBe(gib);
  });

  test('a small root volume without local NVMe RAID0 warns', () => {
    // GIVEN / WHEN
    const { fx } = synthGroup({ instanceType: P5EN, rootVolumeSize: Size.gibibytes(50), localNvmeRaid0: false });
    // THEN
    Annotations.fromStack(fx.stack).hasWarning('/Test/Gpu', Match.stringLikeRegexp("'rootVolumeSize' \\(50 GiB\\).*disagg:smallRootVolume"));
  });

  test('a small root volume with RAID0 (images on NVMe) does not warn', () => {
    // GIVEN / WHEN
    const { fx } = synthGroup({ instanceType: P5EN, rootVolumeSize: Size.gibibytes(50) });
    // THEN
    Annotations.fromStack(fx.stack).hasNoWarning('*', Match.stringLikeRegexp('smallRootVolume'));
  });
});
