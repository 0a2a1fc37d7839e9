import { gpuInstanceProps } from './util';
import { AcceleratedInstanceType, Accelerator, CpuArchitecture, EksAmiType, PurchaseOption } from '../../src';

describe('AcceleratedInstanceType.of validation', () => {
  test('accepts a plausible custom type and applies the defaults', () => {
    const t = AcceleratedInstanceType.of(gpuInstanceProps());
    expect(t.family).toBe('x9');
    expect(t.purchaseOptions).toEqual([
      PurchaseOption.ON_DEMAND, PurchaseOption.SPOT, PurchaseOption.CAPACITY_RESERVATION, PurchaseOption.CAPACITY_BLOCK,
    ]);
    expect(t.ultraServerSize).toBeUndefined();
    expect(t.minKubernetesVersion).toBeUndefined();
    // 8 cards, 8 EFA: efa-only on card 0 device 1 plus cards 1-7
    expect(t.networkInterfaceLayout()).toHaveLength(9);
  });

  test.each([
    ['name', { name: 'P5 big' }, /'name' \('P5 big'\) must be an EC2 instance type name/],
    ['acceleratorCount', { acceleratorCount: 0 }, /'acceleratorCount' \(0\) must be a positive integer/],
    ['vcpus', { vcpus: 1.5 }, /'vcpus' \(1\.5\) must be a positive integer/],
    ['networkCards', { networkCards: 0 }, /'networkCards' \(0\) must be a positive integer/],
    ['memoryGib', { memoryGib: -1 }, /'memoryGib' \(-1\) must be a positive number/],
    ['networkBandwidthGbps', { networkBandwidthGbps: 0 }, /'networkBandwidthGbps' \(0\) must be a positive number/],
    ['localNvmeCount', { localNvmeCount: -2 }, /'localNvmeCount' \(-2\) must be a non-negative integer/],
    ['localNvmeGbEach', { localNvmeGbEach: 0 }, /'localNvmeGbEach' \(0\) must be positive when 'localNvmeCount' is 8/],
    ['maxEfaInterfaces', { maxEfaInterfaces: -1 }, /'maxEfaInterfaces' \(-1\) must be a non-negative integer/],
    ['ultraServerSize', { ultraServerSize: 0 }, /'ultraServerSize' \(0\) must be a positive integer/],
    ['neuronCoresPerDevice', { neuronCoresPerDevice: 2.5 }, /'neuronCoresPerDevice' \(2\.5\) must be a positive integer/],
    ['minKubernetesVersion', { minKubernetesVersion: 'v1.33' }, /'minKubernetesVersion' \('v1\.33'\) must look like '1\.33'/],
    ['efaOnlyCards out of range', { efaOnlyCards: [8] }, /'efaOnlyCards' entry 8 must be a network card index from 1 to 7/],
    ['efaOnlyCards card 0', { efaOnlyCards: [0] }, /entry 0 must be a network card index from 1 to 7; card 0 is set by 'efaOnCardZero'/],
    ['efaOnlyCards duplicate', { efaOnlyCards: [2, 2] }, /'efaOnlyCards' \(2, 2\) lists a card twice/],
    ['too many EFA', { maxEfaInterfaces: 2, efaOnlyCards: [1, 2], efaOnCardZero: true },
      /needs 3 EFA interfaces \('efaOnlyCards' 2 \+ card 0\) but 'maxEfaInterfaces' is 2/],
    ['EFA cards without EFA', { maxEfaInterfaces: 0, efaOnlyCards: [1] }, /needs 1 EFA interfaces .* 'maxEfaInterfaces' is 0/],
    ['empty purchase options', { purchaseOptions: [] }, /'purchaseOptions' must list at least one option/],
    ['AMI vs architecture', { architecture: CpuArchitecture.ARM_64 },
      /'amiType' \(AL2023_x86_64_NVIDIA\) does not match a arm64 nvidia instance; use AL2023_ARM_64_NVIDIA/],
    ['AMI vs vendor', { accelerator: Accelerator.TRAINIUM2 },
      /'amiType' \(AL2023_x86_64_NVIDIA\) does not match a x86_64 aws instance; use AL2023_x86_64_NEURON/],
    ['standard AMI on a GPU type', { amiType: EksAmiType.AL2023_X86_64_STANDARD }, /use AL2023_x86_64_NVIDIA/],
    ['Neuron on arm64', { accelerator: Accelerator.TRAINIUM2, architecture: CpuArchitecture.ARM_64 },
      /Neuron devices are only served by the x86_64 Neuron AMI/],
  ])('rejects a bad %s', (_, patch, message) => {
    expect(() => AcceleratedInstanceType.of(gpuInstanceProps(patch))).toThrow(message);
  });
});
