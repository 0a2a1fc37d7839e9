import { propsOf } from './util';
import {
  AcceleratedInstanceType, Accelerator, AcceleratorVendor, CpuArchitecture, EksAmiType, PurchaseOption,
} from '../../src';

describe('AcceleratedInstanceType catalog', () => {
  test('lists the types of the issues (p4de: issue 21; g5: issue 36), each once', () => {
    const names = AcceleratedInstanceType.all().map(t => t.name);
    expect(names.sort()).toEqual([
      'g5.12xlarge', 'g5.48xlarge', 'g6e.12xlarge', 'g6e.48xlarge', 'p4d.24xlarge', 'p4de.24xlarge', 'p5.48xlarge', 'p5e.48xlarge', 'p5en.48xlarge',
      'p6-b200.48xlarge', 'p6e-gb200.36xlarge', 'trn1.32xlarge', 'trn2.48xlarge', 'trn2u.48xlarge',
    ]);
  });

  test.each(AcceleratedInstanceType.all().map(t => [t.name, t]))('%s passes the validation of of() with its own numbers', (_, t) => {
    // GIVEN a catalogued type read back through its public surface
    // WHEN it is rebuilt with the public factory
    const copy = AcceleratedInstanceType.of(propsOf(t));
    // THEN the copy has the same layout, EFA share and derived facts
    expect(copy.networkInterfaceLayout()).toEqual(t.networkInterfaceLayout());
    expect(copy.efaInterfacesFor(t.acceleratorCount)).toBe(t.efaInterfacesFor(t.acceleratorCount));
    expect(copy.totalAcceleratorMemoryGib).toBe(t.totalAcceleratorMemoryGib);
  });

  test.each(AcceleratedInstanceType.all().map(t => [t.name, t]))('%s derives its facts from its props', (_, t) => {
    expect(t.totalAcceleratorMemoryGib).toBeCloseTo(t.accelerator.memoryGib * t.acceleratorCount, 6);
    expect(t.localNvmeTotalGb).toBe(t.localNvmeCount * t.localNvmeGbEach);
    expect(t.family).toBe(t.name.slice(0, t.name.indexOf('.')));
    expect(t.supportsEfa).toBe(t.maxEfaInterfaces > 0);
    expect(t.efaResourceName).toBe('vpc.amazonaws.com/efa');
    const neuron = t.accelerator.vendor === AcceleratorVendor.AWS;
    expect(t.isNeuron).toBe(neuron);
    expect(t.acceleratorResourceName).toBe(neuron ? 'aws.amazon.com/neuron' : 'nvidia.com/gpu');
    expect(t.neuronCoresPerDevice !== undefined).toBe(neuron);
    // The AMI matches the CPU and the accelerator.
    const ami = neuron ? EksAmiType.AL2023_X86_64_NEURON
      : t.architecture === CpuArchitecture.ARM_64 ? EksAmiType.AL2023_ARM_64_NVIDIA : EksAmiType.AL2023_X86_64_NVIDIA;
    expect(t.amiType).toBe(ami);
  });

  test('published totals (EC2 specs / Karpenter reference)', () => {
    // p5en: 8 x 141 GiB = 1128 GiB of HBM
    expect(AcceleratedInstanceType.P5EN_48XLARGE.totalAcceleratorMemoryGib).toBe(1128);
    // p6-b200: 8 x 179 = 1432 GiB
    expect(AcceleratedInstanceType.P6_B200_48XLARGE.totalAcceleratorMemoryGib).toBe(1432);
    // p6e-gb200: 4 x 185 = 740 GiB
    expect(AcceleratedInstanceType.P6E_GB200_36XLARGE.totalAcceleratorMemoryGib).toBe(740);
    // trn2: 16 x 96 = 1536 GiB, 128 NeuronCores
    expect(AcceleratedInstanceType.TRN2_48XLARGE.totalAcceleratorMemoryGib).toBe(1536);
    expect(AcceleratedInstanceType.TRN2_48XLARGE.acceleratorCount * AcceleratedInstanceType.TRN2_48XLARGE.neuronCoresPerDevice!).toBe(128);
    // trn1: 32 NeuronCores
    expect(AcceleratedInstanceType.TRN1_32XLARGE.acceleratorCount * AcceleratedInstanceType.TRN1_32XLARGE.neuronCoresPerDevice!).toBe(32);
    // p5: 8 x 3800 GB NVMe
    expect(AcceleratedInstanceType.P5_48XLARGE.localNvmeTotalGb).toBe(30400);
    // p4de: 8 x 80 GiB = 640 GiB of HBM2e, 8 x 1000 GB NVMe, 1152 GiB host memory, 96 vCPU, 400 Gbit/s
    const p4de = AcceleratedInstanceType.P4DE_24XLARGE;
    expect(p4de.totalAcceleratorMemoryGib).toBe(640);
    expect(p4de.localNvmeTotalGb).toBe(8000);
    expect([p4de.memoryGib, p4de.vcpus, p4de.networkBandwidthGbps]).toEqual([1152, 96, 400]);
    // p4d: 8 x 40 GiB (40,960 MiB each), 1152 GiB (1,179,648 MiB), 8,000 GB NVMe, 400 Gbit/s, 4 EFA
    const p4d = AcceleratedInstanceType.P4D_24XLARGE;
    expect([p4d.totalAcceleratorMemoryGib, p4d.memoryGib, p4d.vcpus, p4d.localNvmeTotalGb, p4d.networkBandwidthGbps, p4d.maxEfaInterfaces])
      .toEqual([320, 1152, 96, 8000, 400, 4]);
  });

  test('g5 (A10G on PCIe) as DescribeInstanceTypes reports it', () => {
    // g5.12xlarge: 48 vCPU, 196,608 MiB, 4 x 22,888 MiB GPU memory, 3,800 GB NVMe, 40,000 Mbit/s, 1 card, 1 EFA
    const small = AcceleratedInstanceType.G5_12XLARGE;
    expect([small.acceleratorCount, small.vcpus, small.memoryGib * 1024, small.localNvmeTotalGb, small.networkBandwidthGbps])
      .toEqual([4, 48, 196_608, 3800, 40]);
    expect([small.networkCards, small.maxEfaInterfaces]).toEqual([1, 1]);
    // g5.48xlarge: 192 vCPU, 786,432 MiB, 8 x 22,888 MiB, 2 x 3,800 GB NVMe, 100,000 Mbit/s, 1 card, 1 EFA
    const large = AcceleratedInstanceType.G5_48XLARGE;
    expect([large.acceleratorCount, large.vcpus, large.memoryGib * 1024, large.localNvmeCount, large.localNvmeTotalGb, large.networkBandwidthGbps])
      .toEqual([8, 192, 786_432, 2, 7600, 100]);
    expect([large.networkCards, large.maxEfaInterfaces]).toEqual([1, 1]);
    for (const t of [small, large]) {
      expect(t.accelerator).toBe(Accelerator.A10G);
      expect(t.accelerator.interconnect).toBe('PCIe Gen4');
      expect(t.accelerator.memoryGib).toBeCloseTo(22_888 / 1024, 2);
      // Capacity Blocks do not offer g5
      expect(t.supportsPurchaseOption(PurchaseOption.CAPACITY_BLOCK)).toBe(false);
      expect(t.supportsPurchaseOption(PurchaseOption.SPOT)).toBe(true);
    }
  });

  test('p4de.24xlarge is p4d.24xlarge with the 80 GB A100', () => {
    const p4d = AcceleratedInstanceType.P4D_24XLARGE;
    const p4de = AcceleratedInstanceType.P4DE_24XLARGE;
    expect({ ...p4de, name: p4d.name, family: p4d.family, accelerator: p4d.accelerator, totalAcceleratorMemoryGib: 0 })
      .toEqual({ ...p4d, totalAcceleratorMemoryGib: 0 });
    expect(p4de.networkInterfaceLayout()).toEqual(p4d.networkInterfaceLayout());
    expect(p4de.accelerator.memoryGib).toBe(2 * p4d.accelerator.memoryGib);
  });

  test('accelerators per type', () => {
    expect(AcceleratedInstanceType.P4D_24XLARGE.accelerator).toBe(Accelerator.A100_40GB);
    expect(AcceleratedInstanceType.P4DE_24XLARGE.accelerator).toBe(Accelerator.A100_80GB);
    expect(AcceleratedInstanceType.G6E_12XLARGE.accelerator).toBe(Accelerator.L40S);
    expect(AcceleratedInstanceType.P5_48XLARGE.accelerator).toBe(Accelerator.H100);
    expect(AcceleratedInstanceType.P5E_48XLARGE.accelerator).toBe(Accelerator.H200);
    expect(AcceleratedInstanceType.P5EN_48XLARGE.accelerator).toBe(Accelerator.H200);
    expect(AcceleratedInstanceType.P6_B200_48XLARGE.accelerator).toBe(Accelerator.B200);
    expect(AcceleratedInstanceType.P6E_GB200_36XLARGE.accelerator).toBe(Accelerator.GB200);
    expect(AcceleratedInstanceType.TRN2U_48XLARGE.accelerator).toBe(Accelerator.TRAINIUM2);
    expect(AcceleratedInstanceType.G6E_48XLARGE.accelerator).toBe(Accelerator.L40S);
    expect(AcceleratedInstanceType.G5_12XLARGE.accelerator).toBe(Accelerator.A10G);
    expect(AcceleratedInstanceType.G5_48XLARGE.accelerator).toBe(Accelerator.A10G);
  });

  test('purchase constraints', () => {
    // p6e-gb200 is sold only as Capacity Blocks
    const gb200 = AcceleratedInstanceType.P6E_GB200_36XLARGE;
    expect(gb200.purchaseOptions).toEqual([PurchaseOption.CAPACITY_BLOCK]);
    expect(gb200.supportsPurchaseOption(PurchaseOption.ON_DEMAND)).toBe(false);
    expect(gb200.minKubernetesVersion).toBe('1.33');
    expect(gb200.ultraServerSize).toBe(18);
    // trn2u has no Spot
    expect(AcceleratedInstanceType.TRN2U_48XLARGE.supportsPurchaseOption(PurchaseOption.SPOT)).toBe(false);
    expect(AcceleratedInstanceType.TRN2U_48XLARGE.ultraServerSize).toBe(4);
    // g6e is not offered as Capacity Blocks; p5 allows everything
    expect(AcceleratedInstanceType.G6E_12XLARGE.supportsPurchaseOption(PurchaseOption.CAPACITY_BLOCK)).toBe(false);
    for (const option of [PurchaseOption.ON_DEMAND, PurchaseOption.SPOT, PurchaseOption.CAPACITY_RESERVATION, PurchaseOption.CAPACITY_BLOCK]) {
      expect(AcceleratedInstanceType.P5_48XLARGE.supportsPurchaseOption(option)).toBe(true);
    }
  });
});

describe('AcceleratedInstanceType.fromName', () => {
  test('finds every catalogued type, case-insensitively', () => {
    for (const t of AcceleratedInstanceType.all()) {
      expect(AcceleratedInstanceType.fromName(t.name)).toBe(t);
      expect(AcceleratedInstanceType.fromName(` ${t.name.toUpperCase()} `)).toBe(t);
    }
  });

  test('an unknown name lists the known ones and the escape hatch', () => {
    expect(() => AcceleratedInstanceType.fromName('p7.96xlarge')).toThrow(
      /Unknown instance type 'p7\.96xlarge'; known: p4d\.24xlarge, p4de\.24xlarge, p5\.48xlarge, .*g6e\.48xlarge, or use AcceleratedInstanceType\.of\(\{\.\.\.\}\)/,
    );
  });
});
