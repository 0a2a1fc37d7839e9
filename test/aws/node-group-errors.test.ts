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
