import { AcceleratedInstanceType, ModelArchitecture, Precision } from '../../catalog';
import { resolveKvBlockSize } from '../../sizing/private/kv-block-size';
import { ModelCache } from '../model-cache';
import { ModelDeploymentOptions } from '../model-deployment-options';
import { ModelSource } from '../model-source';
import { VllmVersion } from '../vllm-version';

/** The shared deployment options resolved and checked (internal). */
export interface ResolvedModel {
  readonly name: string;
  readonly model: ModelArchitecture;
  readonly source: ModelSource;
  readonly weightPrecision: Precision;
  readonly kvCachePrecision: Precision;
  readonly prequantized: boolean;
  readonly maxContext: number;
  readonly kvBlockSize: number;
  readonly servedModelName: string;
  readonly modelCache: ModelCache;
  /** Seconds a model load may take before the startup probe gives up. */
  readonly startupSeconds: number;
  /** Bytes of the checkpoint as stored (native precision). */
  readonly checkpointBytes: number;
}

/**
 * Resolves the options every vLLM deployment shares and throws, naming the prop, the value and a fix,
 * for malformed ones. `defaultName` applies when `name` is unset. `instanceTypes`: the pools' (the KV
 * block size of an MLA model depends on their accelerators; kv-block-size.ts).
 */
export function resolveModel(where: string, props: ModelDeploymentOptions, defaultName: string,
  instanceTypes: AcceleratedInstanceType[], maxNameLength = 40): ResolvedModel {
  const model = props.model;
  const name = props.name ?? defaultName;
  const label = new RegExp(`^[a-z]([-a-z0-9]{0,${maxNameLength - 2}}[a-z0-9])?$`);
  if (!label.test(name)) {
    throw new Error(`${where}: 'name' ('${name}') must be a DNS label of at most ${maxNameLength} characters (lower case, digits, '-', starting with a letter); pass 'name'`);
  }
  const source = props.modelSource ?? ModelSource.huggingFace(model.huggingFaceId);
  const weightPrecision = props.weightPrecision ?? model.nativePrecision;
  const kvCachePrecision = props.kvCachePrecision ?? Precision.BF16;
  if (!kvCachePrecision.supportedForKvCache) {
    const usable = Precision.all().filter(p => p.supportedForKvCache).map(p => p.name).join(', ');
    throw new Error(`${where}: 'kvCachePrecision' (${kvCachePrecision.name}) cannot hold a vLLM KV cache; use ${usable}`);
  }
  const prequantized = props.prequantizedCheckpoint ?? false;
  // Neuron quantizes nothing at load time: its pools' own rule (neuronPrecisionProblems) says what runs
  // there, and this one's fix (FP8 from a BF16 checkpoint) would not.
  const neuron = instanceTypes.some(t => t.isNeuron);
  if (!prequantized && !neuron && weightPrecision !== model.nativePrecision && weightPrecision !== Precision.FP8
    && weightPrecision.bytesPerElement < model.nativePrecision.bytesPerElement) {
    throw new Error(`${where}: 'weightPrecision' (${weightPrecision.name}) needs a checkpoint stored in ${weightPrecision.name}: vLLM quantizes ` +
      `a ${model.nativePrecision.name} checkpoint at load time only to fp8. Point 'modelSource' at a ${weightPrecision.name} checkpoint and set ` +
      "'prequantizedCheckpoint: true', or use Precision.FP8");
  }
  const maxContext = props.maxContext ?? model.maxContext;
  const kvBlockSize = resolveKvBlockSize(where, model, props.kvBlockSize, instanceTypes);
  const bandwidth = props.modelLoadBandwidthGBps ?? 0.5;
  const overhead = props.startupOverheadSeconds ?? 600;
  if (!(Number.isFinite(bandwidth) && bandwidth > 0)) {
    throw new Error(`${where}: 'modelLoadBandwidthGBps' (${bandwidth}) must be a positive number of GB/s; 0.5 suits a Hugging Face download`);
  }
  if (!(Number.isFinite(overhead) && overhead >= 0)) {
    throw new Error(`${where}: 'startupOverheadSeconds' (${overhead}) must be a number >= 0`);
  }
  const checkpointBytes = model.parametersTotal * model.nativePrecision.bytesPerElement;
  return {
    name,
    model,
    source,
    weightPrecision,
    kvCachePrecision,
    prequantized,
    maxContext,
    kvBlockSize,
    servedModelName: props.servedModelName ?? model.huggingFaceId,
    modelCache: props.modelCache ?? ModelCache.nodeLocal(),
    startupSeconds: Math.ceil(checkpointBytes / (bandwidth * 1e9) + overhead),
    checkpointBytes,
  };
}

/** Drops undefined values (cdk8s keeps explicit undefined keys out anyway; this keeps snapshots tidy). */
/** The vLLM release the workers run: the prop, else the image tag's, else the bundled image's. */
export function resolveVllmVersion(props: ModelDeploymentOptions): VllmVersion {
  return props.vllmVersion ?? VllmVersion.fromImage(props.image) ?? VllmVersion.BUNDLED;
}

export function strip<T extends Record<string, unknown>>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}
