import { Template } from 'aws-cdk-lib/assertions';
import { onlyResource, synthGroup } from './util';
import { NodeCapacity } from '../../src/aws';
import { AcceleratedInstanceType, NetworkInterfaceType } from '../../src/catalog';

interface Case {
  readonly type: AcceleratedInstanceType;
  readonly interfaces: number;
  readonly efaOnlyCards: number[];
  readonly efaOnlyOnCardZero: boolean;
  readonly amiType: string;
  readonly capacity?: NodeCapacity;
  readonly capacityType: string;
}

// Expected layouts: EC2 "maximize network bandwidth" guide (one efa-only device 0 per card besides
// the ENA primary; efa-only on card 0 device 1 where card 0 supports EFA), EKS AMI types per family.
const CASES: Case[] = [
  { type: AcceleratedInstanceType.P5_48XLARGE, interfaces: 33, efaOnlyCards: range(1, 32), efaOnlyOnCardZero: true, amiType: 'AL2023_x86_64_NVIDIA', capacityType: 'ON_DEMAND' },
  { type: AcceleratedInstanceType.P5E_48XLARGE, interfaces: 33, efaOnlyCards: range(1, 32), efaOnlyOnCardZero: true, amiType: 'AL2023_x86_64_NVIDIA', capacityType: 'ON_DEMAND' },
  { type: AcceleratedInstanceType.P5EN_48XLARGE, interfaces: 17, efaOnlyCards: range(1, 16), efaOnlyOnCardZero: true, amiType: 'AL2023_x86_64_NVIDIA', capacityType: 'ON_DEMAND' },
  { type: AcceleratedInstanceType.P6_B200_48XLARGE, interfaces: 9, efaOnlyCards: range(1, 8), efaOnlyOnCardZero: true, amiType: 'AL2023_x86_64_NVIDIA', capacityType: 'ON_DEMAND' },
  {
    type: AcceleratedInstanceType.P6E_GB200_36XLARGE,
    interfaces: 5,
    efaOnlyCards: [1, 5, 9, 13],
    efaOnlyOnCardZero: false,
    amiType: 'AL2023_ARM_64_NVIDIA',
    capacity: NodeCapacity.capacityBlock('cr-0123456789abcdef0'),
    capacityType: 'CAPACITY_BLOCK',
  },
  { type: AcceleratedInstanceType.TRN2_48XLARGE, interfaces: 17, efaOnlyCards: range(1, 16), efaOnlyOnCardZero: true, amiType: 'AL2023_x86_64_NEURON', capacityType: 'ON_DEMAND' },
];

function range(from: number, to: number): number[] {
  return Array.from({ length: to - from }, (_, i) => from + i);
}

describe.each(CASES)('launch template of $type.name', (c) => {
  let template: Template;
  let data: any;
  let efaGroupLogicalId: string;

  beforeAll(() => {
    // GIVEN an accelerated node group of this type on an imported cluster
    ({ template } = synthGroup({ instanceType: c.type, capacity: c.capacity }));
    // WHEN the stack is synthesized
    data = onlyResource(template, 'AWS::EC2::LaunchTemplate').Properties.LaunchTemplateData;
    efaGroupLogicalId = Object.keys(template.findResources('AWS::EC2::SecurityGroup'))[0];
  });

  test('holds the instance type (the node group has none)', () => {
    // THEN
    expect(data.InstanceType).toBe(c.type.name);
    const ng = onlyResource(template, 'AWS::EKS::Nodegroup').Properties;
    expect(ng.InstanceTypes).toBeUndefined();
    expect(ng.AmiType).toBe(c.amiType);
    expect(ng.CapacityType).toBe(c.capacityType);
  });

  test('has one interface per EFA layout slot with the primary ENA on card 0 device 0', () => {
    // THEN
    const nis: any[] = data.NetworkInterfaces;
    expect(nis).toHaveLength(c.interfaces);
    expect(nis[0]).toMatchObject({ NetworkCardIndex: 0, DeviceIndex: 0, InterfaceType: NetworkInterfaceType.INTERFACE });
    const efaOnly = nis.filter((n) => n.InterfaceType === 'efa-only');
    expect(efaOnly).toHaveLength(c.interfaces - 1);
    const onCardZero = efaOnly.some((n) => n.NetworkCardIndex === 0 && n.DeviceIndex === 1);
    expect(onCardZero).toBe(c.efaOnlyOnCardZero);
    const otherCards = efaOnly.filter((n) => n.NetworkCardIndex !== 0);
    expect(otherCards.map((n) => n.NetworkCardIndex)).toEqual(c.efaOnlyCards);
    expect(otherCards.every((n) => n.DeviceIndex === 0)).toBe(true);
  });

  test('puts the EFA group and the cluster group on every interface, and no subnet, public IP or top-level groups', () => {
    // THEN
    for (const ni of data.NetworkInterfaces) {
      expect(ni.Groups).toEqual([{ 'Fn::GetAtt': [efaGroupLogicalId, 'GroupId'] }, 'sg-0cluster0000000000']);
      expect(ni.SubnetId).toBeUndefined();
      expect(ni.AssociatePublicIpAddress).toBeUndefined();
    }
    expect(data.SecurityGroupIds).toBeUndefined();
  });

  test('requires IMDSv2 with a hop limit that reaches pods, and an encrypted gp3 root volume', () => {
    // THEN
    expect(data.MetadataOptions).toEqual({ HttpEndpoint: 'enabled', HttpTokens: 'required', HttpPutResponseHopLimit: 1 });
    expect(data.BlockDeviceMappings[0]).toMatchObject({
      DeviceName: '/dev/xvda',
      Ebs: { VolumeSize: 300, VolumeType: 'gp3', Encrypted: true },
    });
  });

  test('assembles local NVMe into RAID0 through a nodeadm NodeConfig part', () => {
    // THEN
    const text = data.UserData['Fn::Base64'] as string;
    expect(text).toMatch(/Content-Type: multipart\/mixed; boundary=/);
    expect(text).toMatch(/Content-Type: application\/node.eks.aws/);
    expect(text).toMatch(/kind: NodeConfig[\s\S]*localStorage:\s*\n\s*strategy: RAID0/);
  });
});
