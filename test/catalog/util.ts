import {
  AcceleratedInstanceType, AcceleratedInstanceTypeProps, Accelerator, CpuArchitecture, EksAmiType,
  NetworkInterfaceSlot, NetworkInterfaceType,
} from '../../src';

/** Props of a plausible 8-GPU x86 instance for validation tests. */
export function gpuInstanceProps(overrides: Partial<AcceleratedInstanceTypeProps> = {}): AcceleratedInstanceTypeProps {
  return {
    name: 'x9.48xlarge',
    accelerator: Accelerator.H100,
    acceleratorCount: 8,
    vcpus: 192,
    memoryGib: 2048,
    localNvmeCount: 8,
    localNvmeGbEach: 3800,
    networkBandwidthGbps: 3200,
    networkCards: 8,
    maxEfaInterfaces: 8,
    architecture: CpuArchitecture.X86_64,
    amiType: EksAmiType.AL2023_X86_64_NVIDIA,
    ...overrides,
  };
}

/** The props that rebuild a catalogued type through the public factory, read back from its public surface. */
export function propsOf(t: AcceleratedInstanceType): AcceleratedInstanceTypeProps {
  const layout = t.networkInterfaceLayout();
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
    efaOnlyCards: layout.filter(s => s.networkCardIndex > 0).map(s => s.networkCardIndex),
    efaOnCardZero: layout.some(s => s.networkCardIndex === 0 && s.deviceIndex === 1),
    purchaseOptions: t.purchaseOptions,
    ultraServerSize: t.ultraServerSize,
    minKubernetesVersion: t.minKubernetesVersion,
    neuronCoresPerDevice: t.neuronCoresPerDevice,
    logicalNeuronCoreConfigs: t.isNeuron ? t.logicalNeuronCoreConfigs : undefined,
  };
}

/**
 * The layout the EC2 guide prescribes, written out independently of the implementation:
 * ENA at card 0 device 0, efa-only at card 0 device 1 when card 0 has EFA, efa-only at device 0 of each listed card.
 */
export function expectedLayout(efaCards: number[], efaOnCardZero: boolean): NetworkInterfaceSlot[] {
  const slots: NetworkInterfaceSlot[] = [{ networkCardIndex: 0, deviceIndex: 0, interfaceType: NetworkInterfaceType.INTERFACE }];
  if (efaOnCardZero) slots.push({ networkCardIndex: 0, deviceIndex: 1, interfaceType: NetworkInterfaceType.EFA_ONLY });
  for (const card of efaCards) slots.push({ networkCardIndex: card, deviceIndex: 0, interfaceType: NetworkInterfaceType.EFA_ONLY });
  return slots;
}

/** [from, to) as a list. */
export function cards(from: number, to: number): number[] {
  return Array.from({ length: to - from }, (_, i) => from + i);
}
