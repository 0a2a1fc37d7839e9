import {
  AcceleratedInstanceType, Accelerator, AcceleratorVendor, AttentionKind, CpuArchitecture, EksAmiType, ModelArchitecture,
  ModelArchitectureProps,
} from '../../src/catalog';

/** An H100-like device with `memoryGib` of memory (everything else as H100). */
export function deviceWithMemory(memoryGib: number): Accelerator {
  return Accelerator.of({
    name: `X${memoryGib}`,
    vendor: AcceleratorVendor.NVIDIA,
    memoryGib,
    hbmBandwidthGBps: Accelerator.H100.hbmBandwidthGBps,
    peakTflopsBf16: 989,
    peakTflopsFp8: 1979,
    interconnectGBps: Accelerator.H100.interconnectGBps,
    interconnect: 'NVLink4',
  });
}

/** A p5-like node of `count` devices of `accelerator`, 8 EFA interfaces. */
export function nodeOf(accelerator: Accelerator, count = 8): AcceleratedInstanceType {
  return AcceleratedInstanceType.of({
    name: `test.${accelerator.name.toLowerCase()}x${count}`,
    accelerator,
    acceleratorCount: count,
    vcpus: 192,
    memoryGib: 2048,
    localNvmeCount: 0,
    localNvmeGbEach: 0,
    networkBandwidthGbps: 3200,
    networkCards: 8,
    maxEfaInterfaces: 8,
    architecture: CpuArchitecture.X86_64,
    amiType: EksAmiType.AL2023_X86_64_NVIDIA,
  });
}

/** A small dense model with the given attention layout (defaults: 8 layers, 32 heads x 128). */
export function denseModel(overrides: Partial<ModelArchitectureProps> & { attentionKind: AttentionKind; kvHeads: number }): ModelArchitecture {
  return ModelArchitecture.custom({
    name: 'test-model',
    huggingFaceId: 'test/test-model',
    parametersTotal: 1e9,
    layers: 8,
    hiddenSize: 4096,
    attentionHeads: 32,
    headDim: 128,
    vocabSize: 32000,
    maxContext: 32768,
    ...overrides,
  });
}
