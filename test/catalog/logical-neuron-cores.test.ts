import { gpuInstanceProps } from './util';
import { AcceleratedInstanceType, Accelerator, EksAmiType } from '../../src';

// Logical NeuronCore configuration (LNC): trn2 groups 2 physical cores by default (64 per instance) or
// none (128); trn1 supports LNC 1 only.
// https://awsdocs-neuron.readthedocs-hosted.com/en/latest/general/arch/neuron-features/logical-neuroncore-config.html
describe('AcceleratedInstanceType logical NeuronCores', () => {
  test('trn2 exposes 64 logical cores at its default LNC 2 and 128 at LNC 1', () => {
    const t = AcceleratedInstanceType.TRN2_48XLARGE;
    expect(t.logicalNeuronCoreConfigs).toEqual([2, 1]);
    expect(t.logicalNeuronCoresPerDevice() * t.acceleratorCount).toBe(64);
    expect(t.logicalNeuronCoresPerDevice(1) * t.acceleratorCount).toBe(128);
    expect(AcceleratedInstanceType.TRN2U_48XLARGE.logicalNeuronCoreConfigs).toEqual([2, 1]);
  });

  test('trn1 supports LNC 1 only: 2 cores per device', () => {
    const t = AcceleratedInstanceType.TRN1_32XLARGE;
    expect(t.logicalNeuronCoreConfigs).toEqual([1]);
    expect(t.logicalNeuronCoresPerDevice()).toBe(2);
    expect(() => t.logicalNeuronCoresPerDevice(2)).toThrow(/Logical NeuronCore configuration 2 is not supported on trn1\.32xlarge; use 1/);
  });

  test('GPU types have no NeuronCores', () => {
    expect(AcceleratedInstanceType.P5EN_48XLARGE.logicalNeuronCoreConfigs).toEqual([]);
    expect(() => AcceleratedInstanceType.P5EN_48XLARGE.logicalNeuronCoresPerDevice()).toThrow(/p5en\.48xlarge has H200 GPUs, not Neuron devices/);
  });

  test('a custom Neuron type defaults to LNC 1', () => {
    // GIVEN a Trainium2 type without logicalNeuronCoreConfigs
    const t = AcceleratedInstanceType.of(gpuInstanceProps({
      name: 'trn9.2xlarge', accelerator: Accelerator.TRAINIUM2, amiType: EksAmiType.AL2023_X86_64_NEURON, neuronCoresPerDevice: 8,
    }));
    // THEN
    expect(t.logicalNeuronCoreConfigs).toEqual([1]);
    expect(t.logicalNeuronCoresPerDevice()).toBe(8);
  });

  test.each([
    ['LNC on a GPU', { logicalNeuronCoreConfigs: [1] }, /'neuronCoresPerDevice' and 'logicalNeuronCoreConfigs' describe Neuron devices, not H100; remove them/],
    ['LNC not dividing the cores', { accelerator: Accelerator.TRAINIUM2, amiType: EksAmiType.AL2023_X86_64_NEURON, neuronCoresPerDevice: 8, logicalNeuronCoreConfigs: [3] },
      /'logicalNeuronCoreConfigs' entry 3 must be a positive integer dividing the 8 NeuronCores/],
    ['empty LNC list', { accelerator: Accelerator.TRAINIUM2, amiType: EksAmiType.AL2023_X86_64_NEURON, neuronCoresPerDevice: 8, logicalNeuronCoreConfigs: [] },
      /'logicalNeuronCoreConfigs' must list at least one LNC/],
  ])('rejects %s', (_, patch, message) => {
    expect(() => AcceleratedInstanceType.of(gpuInstanceProps(patch))).toThrow(message);
  });
});
