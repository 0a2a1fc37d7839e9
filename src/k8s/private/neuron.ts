import { AcceleratedInstanceType, Accelerator, Precision } from '../../catalog';

/**
 * What vLLM on AWS Neuron (Trainium) takes, as the Neuron documentation describes it (internal). Each
 * fact carries its source; the pools use these instead of the CUDA defaults.
 *
 * Sources (AWS Neuron documentation, vLLM Neuron plugin):
 * - features guide (quantization, DI): https://awsdocs-neuron.readthedocs-hosted.com/en/latest/vllm-neuron/docs/guides/features-guide.html
 * - configuration reference: https://awsdocs-neuron.readthedocs-hosted.com/en/latest/vllm-neuron/docs/guides/reference-configuration.html
 * - DI tutorial (1P1D / xPyD): https://awsdocs-neuron.readthedocs-hosted.com/en/latest/vllm-neuron/docs/tutorials/tutorial-di-1p1d-xpyd.html
 * - DI design: https://awsdocs-neuron.readthedocs-hosted.com/en/latest/vllm-neuron/docs/design/vllm/disaggregated-inference.html
 * - LNC: https://awsdocs-neuron.readthedocs-hosted.com/en/latest/general/arch/neuron-features/logical-neuroncore-config.html
 * - device plugin resources: https://awsdocs-neuron.readthedocs-hosted.com/en/latest/containers/tutorials/k8s-neuron-device-plugin.html
 * - connected device sets: https://awsdocs-neuron.readthedocs-hosted.com/en/latest/deploy/infrastructure/scheduler.html (trn1)
 *   and the Neuron DRA driver's device groups of 1, 4, 8 and 16 on trn2 (aws-neuron/aws-neuron-sdk deploy/eks/dra.rst)
 * - Llama 3 recipe (no pipeline parallelism): https://awsdocs-neuron.readthedocs-hosted.com/en/latest/vllm-neuron/docs/model-recipes/llama-3.html
 * - vLLM Neuron DLC: https://awsdocs-neuron.readthedocs-hosted.com/en/latest/containers/get-started/quickstart-configure-deploy-dlc.html
 */
export const NEURON_DOCS = {
  features: 'https://awsdocs-neuron.readthedocs-hosted.com/en/latest/vllm-neuron/docs/guides/features-guide.html',
  disaggregated: 'https://awsdocs-neuron.readthedocs-hosted.com/en/latest/vllm-neuron/docs/tutorials/tutorial-di-1p1d-xpyd.html',
  lnc: 'https://awsdocs-neuron.readthedocs-hosted.com/en/latest/general/arch/neuron-features/logical-neuroncore-config.html',
  dlc: 'https://awsdocs-neuron.readthedocs-hosted.com/en/latest/containers/get-started/quickstart-configure-deploy-dlc.html',
} as const;

/**
 * Neuron devices one pod may request. The Neuron scheduler extension allocates 1, 4, 8 or 16 connected
 * devices on trn1's 2D torus (and refuses other counts); the Neuron DRA driver offers the same connected
 * groups on trn2 (devicegroup1/4/8/16). Other counts may get devices that are not neighbours.
 */
export const NEURON_DEVICES_PER_POD = [1, 4, 8, 16];

/** The Trainium generations whose vLLM Neuron supports disaggregated prefill/decode: the DI tutorial names Trn2 and Trn3. */
const DISAGGREGATION_ACCELERATORS = [Accelerator.TRAINIUM2];

/**
 * The LNC of a Neuron pool, or undefined for a GPU pool; a problem (naming `field`) when the value does
 * not fit the instance type.
 */
export function resolveLnc(type: AcceleratedInstanceType, value: number | undefined, field: string): { lnc?: number; problem?: string } {
  if (!type.isNeuron) {
    return value === undefined ? {} : { problem: `'${field}' (${value}) applies to Trainium pools only; ${type.name} has GPUs: remove it` };
  }
  const lnc = value ?? type.logicalNeuronCoreConfigs[0];
  if (!type.logicalNeuronCoreConfigs.includes(lnc)) {
    return { problem: `'${field}' (${value}) is not a Logical NeuronCore configuration of ${type.name}; use ${type.logicalNeuronCoreConfigs.join(' or ')} (${NEURON_DOCS.lnc})` };
  }
  return { lnc };
}

/**
 * vLLM's `--tensor-parallel-size` for a pool of `devices` accelerators per replica: GPUs count
 * themselves; Neuron's vLLM counts logical NeuronCores, `devices x cores per device at the LNC`
 * (trn2 at LNC 2: 4 per device; the DLC quickstart sizes TP by "cores per device and logical core
 * configuration").
 */
export function vllmTensorParallel(type: AcceleratedInstanceType, devices: number, lnc: number | undefined): number {
  return type.isNeuron ? devices * type.logicalNeuronCoresPerDevice(lnc) : devices;
}

/**
 * What a Neuron pool cannot run, one message per problem (empty for GPU pools and runnable ones).
 * Weight precisions: vLLM Neuron has two weight quantization paths, static FP8 from a calibrated
 * checkpoint's `quantization_config` (no `--quantization` flag; Trn2) and MXFP4 for gpt-oss on Trn3
 * through `neuron_config`; it rejects compressed-tensors weight quantization (features guide).
 */
export function neuronPrecisionProblems(type: AcceleratedInstanceType, weights: Precision, native: Precision, prequantized: boolean): string[] {
  if (!type.isNeuron || weights === native || weights.bytesPerElement === native.bytesPerElement) {
    return [];
  }
  const bf16 = 'or use Precision.BF16 (the checkpoint as stored)';
  if (weights === Precision.FP8) {
    return prequantized ? [] : [`'weightPrecision' (fp8) on ${type.name}: vLLM Neuron does not quantize at load time (no '--quantization'); ` +
      `it runs FP8 weights from a calibrated static-FP8 (ModelOpt) checkpoint. Point 'modelSource' at one and set 'prequantizedCheckpoint: true', ${bf16} ` +
      `(${NEURON_DOCS.features})`];
  }
  if (weights === Precision.FP4) {
    return [`'weightPrecision' (fp4) on ${type.name}: vLLM Neuron runs MXFP4 only for gpt-oss on Trn3 and rejects it on Trn2; ` +
      `use Precision.FP8 with a static-FP8 checkpoint, ${bf16} (${NEURON_DOCS.features})`];
  }
  return [`'weightPrecision' (${weights.name}) on ${type.name}: vLLM Neuron's weight quantization is static FP8 (Trn2) or MXFP4 (gpt-oss on Trn3) ` +
    `and it rejects compressed-tensors / AWQ / GPTQ weights; use Precision.FP8 with a static-FP8 checkpoint, ${bf16} (${NEURON_DOCS.features})`];
}

/**
 * Why Neuron cannot serve a P/D pair on these types, or undefined when it can. `field` names the prop
 * that picked the type.
 */
export function neuronDisaggregationProblem(type: AcceleratedInstanceType, field: string): string | undefined {
  if (!type.isNeuron || DISAGGREGATION_ACCELERATORS.includes(type.accelerator)) {
    return undefined;
  }
  return `'${field}' (${type.name}): vLLM Neuron supports disaggregated prefill/decode on Trn2 and Trn3, not on ${type.accelerator.name}; ` +
    `use trn2.48xlarge for both pools (${NEURON_DOCS.disaggregated})`;
}

/**
 * vLLM's `--kv-transfer-config` for a Neuron pool: NixlConnector over LIBFABRIC (EFA) with the
 * producer / consumer roles and the `kv_buffer_device` of the Neuron DI tutorial and design document.
 */
export function neuronKvTransferConfig(role: string): Record<string, unknown> {
  return {
    kv_connector: 'NixlConnector',
    // The tutorial's prefill server is the KV producer and its decode server the consumer.
    kv_role: role === 'prefill' ? 'kv_producer' : 'kv_consumer',
    // As in every Neuron DI example; the LIBFABRIC plugin links libcuda.so.1 (a stub suffices on Neuron).
    kv_buffer_device: 'cuda',
    kv_connector_extra_config: { backends: ['LIBFABRIC'] },
  };
}
