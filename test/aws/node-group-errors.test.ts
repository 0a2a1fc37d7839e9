import { Size } from 'aws-cdk-lib';
import { Annotations, Match } from 'aws-cdk-lib/assertions';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import { fixture } from './util';
import { AcceleratedNodeGroup, NodeCapacity } from '../../src/aws';
import { AcceleratedInstanceType, EksAmiType } from '../../src/catalog';

const CR = 'cr-0123456789abcdef0';

function add(props: Partial<ConstructorParameters<typeof AcceleratedNodeGroup>[2]>, knownAzs = false) {
  const fx = fixture(knownAzs);
  const group = new AcceleratedNodeGroup(fx.stack, 'Gpu', {
    cluster: fx.cluster,
    instanceType: AcceleratedInstanceType.P5EN_48XLARGE,
    ...props,
  });
  return { fx, group };
}

describe('errors that teach', () => {
  test('p6e-gb200 without a Capacity Block', () => {
    // GIVEN / WHEN / THEN
    expect(() => add({ instanceType: AcceleratedInstanceType.P6E_GB200_36XLARGE }))
      .toThrow(/'capacity' \(on-demand\) is not available for p6e-gb200\.36xlarge.*capacityBlock\('cr-\.\.\.'\)/);
  });

  test('spot on a type that does not allow it', () => {
    // GIVEN / WHEN / THEN
    expect(() => add({ instanceType: AcceleratedInstanceType.TRN2U_48XLARGE, capacity: NodeCapacity.spot() }))
      .toThrow(/'capacity' \(spot\) is not available for trn2u\.48xlarge.*NodeCapacity\.onDemand\(\)/);
  });

  test('EFA node group over several subnets (AZs)', () => {
    // GIVEN / WHEN / THEN
    expect(() => add({ subnets: { subnetType: ec2.SubnetType.PRIVATE_WITH_EGRESS } }))
      .toThrow(/'subnets' selects 2 subnets .* EFA node group of p5en\.48xlarge.*exactly one subnet/);
  });

  test('explicit subnet in another AZ than the reservation', () => {
    // GIVEN
    const fx = fixture(true);
    const inA = fx.vpc.privateSubnets.find((s) => s.availabilityZone === 'us-east-2a')!;
    // WHEN / THEN
    expect(() => new AcceleratedNodeGroup(fx.stack, 'Gpu', {
      cluster: fx.cluster,
      instanceType: AcceleratedInstanceType.P5EN_48XLARGE,
      capacity: NodeCapacity.capacityBlock(CR, { availabilityZone: 'us-east-2b' }),
      subnets: { subnets: [inA] },
    })).toThrow(/in us-east-2a, but capacity cr-0123456789abcdef0 is reserved in us-east-2b; select a subnet in us-east-2b/);
  });

  test('reservation AZ that no private subnet covers', () => {
    // GIVEN / WHEN / THEN
    expect(() => add({ capacity: NodeCapacity.capacityReservation(CR, { availabilityZone: 'us-east-2c' }) }, true))
      .toThrow(/reserved in us-east-2c, but the VPC's private subnets are in us-east-2a, us-east-2b/);
  });

  test('reservation AZ that cannot be checked (environment-agnostic) warns', () => {
    // GIVEN / WHEN
    const { fx } = add({ capacity: NodeCapacity.capacityReservation(CR, { availabilityZone: 'us-east-2c' }) });
    // THEN
    Annotations.fromStack(fx.stack).hasWarning('/Test/Gpu', Match.stringLikeRegexp('disagg:reservationAzUnverified'));
  });

  test('malformed reservation id', () => {
    // GIVEN / WHEN / THEN
    expect(() => NodeCapacity.capacityBlock('reservation-1')).toThrow(/'reservationId' \(reservation-1\) is not an EC2 capacity reservation id/);
  });

  test('Trainium with an NVIDIA AMI', () => {
    // GIVEN / WHEN / THEN
    expect(() => add({ instanceType: AcceleratedInstanceType.TRN2_48XLARGE, amiType: EksAmiType.AL2023_X86_64_NVIDIA }))
      .toThrow(/'amiType' \(AL2023_x86_64_NVIDIA\) cannot drive trn2\.48xlarge.*AL2023_x86_64_NEURON/);
  });

  test('GPU type on a non-GPU AMI', () => {
    // GIVEN / WHEN / THEN
    expect(() => add({ amiType: EksAmiType.AL2023_X86_64_STANDARD })).toThrow(/'amiType' \(AL2023_x86_64_STANDARD\) cannot drive p5en/);
  });

  test('p6e-gb200 on a Kubernetes version EKS does not support for it', () => {
    // GIVEN / WHEN / THEN
    expect(() => add({
      instanceType: AcceleratedInstanceType.P6E_GB200_36XLARGE,
      capacity: NodeCapacity.capacityBlock(CR),
      kubernetesVersion: '1.32',
    })).toThrow(/'kubernetesVersion' \(1\.32\) is too old for p6e-gb200\.36xlarge.*1\.33/);
  });

  test('inconsistent sizes', () => {
    // GIVEN / WHEN / THEN
    expect(() => add({ desiredSize: 2, maxSize: 1 })).toThrow(/'maxSize' \(1\) must be at least 'desiredSize' \(2\)/);
    expect(() => add({ desiredSize: 1, minSize: 3 })).toThrow(/'minSize' \(3\) must not exceed 'desiredSize' \(1\)/);
  });

  test('instanceType missing from JavaScript names the prop and how to pick one', () => {
    // GIVEN props built in JavaScript without an instance type WHEN / THEN
    expect(() => add({ instanceType: undefined } as any))
      .toThrow(/'instanceType' \(undefined\) must be an AcceleratedInstanceType from the catalog: use AcceleratedInstanceType\.P5EN_48XLARGE.*fromName\('p5en\.48xlarge'\)/);
  });

  test('instanceType given as a name points to fromName', () => {
    // GIVEN / WHEN / THEN
    expect(() => add({ instanceType: 'p5en.48xlarge' } as any))
      .toThrow(/'instanceType' \('p5en\.48xlarge'\) must be an AcceleratedInstanceType.*AcceleratedInstanceType\.fromName\('p5en\.48xlarge'\)/);
  });

  test('cluster missing from JavaScript names the prop', () => {
    // GIVEN / WHEN / THEN
    expect(() => add({ cluster: undefined } as any)).toThrow(/'cluster' \(undefined\) must be an eks\.ICluster.*addAcceleratedNodeGroup/);
  });

  test('capacity that is not a NodeCapacity', () => {
    // GIVEN / WHEN / THEN
    expect(() => add({ capacity: 'spot' } as any)).toThrow(/'capacity' \(spot\) must be a NodeCapacity: NodeCapacity\.onDemand\(\)/);
  });

  test.each([
    [0, /'rootVolumeSize' \(0 GiB\) must be from 20 GiB \(the EKS AMI's root snapshot\) to 16,384 GiB/],
    [19, /'rootVolumeSize' \(19 GiB\) must be from 20 GiB/],
    [20_000, /'rootVolumeSize' \(20000 GiB\) must be from 20 GiB .* to 16,384 GiB \(gp3 in a launch template\); use e\.g\. Size\.gibibytes\(300\)/],
  ])('root volume of %i GiB', (gib, message) => {
    // GIVEN / WHEN / THEN
    expect(() => add({ rootVolumeSize: Size.gibibytes(gib as number) })).toThrow(message as RegExp);
  });

  test('root volume that is not a whole number of GiB', () => {
    // GIVEN / WHEN / THEN
    expect(() => add({ rootVolumeSize: Size.mebibytes(100_000) })).toThrow(/'rootVolumeSize' \(.*\) must be a whole number of GiB/);
  });

  test('sizes out of range', () => {
    // GIVEN / WHEN / THEN
    expect(() => add({ maxSize: 0 })).toThrow(/'maxSize' \(0\) must be a whole number >= 1/);
    expect(() => add({ minSize: -1 })).toThrow(/'minSize' \(-1\) must be a whole number >= 0/);
    expect(() => add({ desiredSize: 1.5 })).toThrow(/'desiredSize' \(1\.5\) must be a whole number >= 0/);
  });

  test('update settings out of range', () => {
    // GIVEN / WHEN / THEN
    expect(() => add({ maxUnavailable: 0 })).toThrow(/'maxUnavailable' \(0\) must be a whole number from 1 to 100/);
    expect(() => add({ desiredSize: 2, maxUnavailable: 3 })).toThrow(/'maxUnavailable' \(3\) exceeds 'maxSize' \(2\); use at most 2/);
    expect(() => add({ maxUnavailablePercentage: 150 })).toThrow(/'maxUnavailablePercentage' \(150\) must be a whole number from 1 to 100/);
    expect(() => add({ maxUnavailable: 1, maxUnavailablePercentage: 50 })).toThrow(/'maxUnavailable' \(1\) and 'maxUnavailablePercentage' \(50\) exclude each other/);
    expect(() => add({ updateStrategy: 'FAST' as any })).toThrow(/'updateStrategy' \(FAST\) must be NodeUpdateStrategy\.MINIMAL or NodeUpdateStrategy\.DEFAULT/);
  });

  test('RAID0 asked for on a type without local NVMe', () => {
    // GIVEN
    const noNvme = AcceleratedInstanceType.of({
      ...propsOf(AcceleratedInstanceType.G6E_12XLARGE),
      name: 'g6e.custom',
      localNvmeCount: 0,
      localNvmeGbEach: 0,
    });
    // WHEN / THEN
    expect(() => add({ instanceType: noNvme, localNvmeRaid0: true })).toThrow(/'localNvmeRaid0' is true but g6e\.custom has no instance-store NVMe/);
  });
});

function propsOf(t: AcceleratedInstanceType) {
  return {
    name: t.name,
    accelerator: t.accelerator,
    acceleratorCount: t.acceleratorCount,
    vcpus: t.vcpus,
    memoryGib: t.memoryGib,
    localNvmeCount: t.localNvmeCount,
    localNvmeGbEach: t.localNvmeGbEach,
    networkBandwidthGbps: t.networkBandwidthGbps,
    networkCards: t.networkCards,
    maxEfaInterfaces: t.maxEfaInterfaces,
    architecture: t.architecture,
    amiType: t.amiType,
    purchaseOptions: t.purchaseOptions,
  };
}
