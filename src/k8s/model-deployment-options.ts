import { ModelArchitecture, Precision } from '../catalog';
import { KvTransfer } from './kv-transfer';
import { ModelCache } from './model-cache';
import { ModelSource } from './model-source';
import { NetworkIsolation } from './network-isolation';
import { VllmVersion } from './vllm-version';

/**
 * What every vLLM deployment of one model shares: the model, its weights and KV cache precision, the
 * image, naming and placement. Extended by `DisaggregatedInferenceProps` and `ExpertParallelPoolProps`.
 */
export interface ModelDeploymentOptions {
  /** The model architecture (a catalog preset or `ModelArchitecture.custom(...)`): sizes and validates the pools. */
  readonly model: ModelArchitecture;
  /**
   * Where the weights come from.
   * @default - ModelSource.huggingFace(model.huggingFaceId), without a token
   */
  readonly modelSource?: ModelSource;
  /**
   * The container image of the vLLM workers (vLLM with NIXL and libfabric): the project's engine image
   * (`images/engine`, or `EngineImage` in a CDK app) for GPU pools. Trainium pools need a vLLM Neuron
   * image instead (the Neuron DLC `public.ecr.aws/neuron/pytorch-inference-vllm-neuronx`), which for
   * prefill/decode must also carry NIXL's LIBFABRIC backend, libfabric and a `libcuda.so.1` stub.
   * @see https://awsdocs-neuron.readthedocs-hosted.com/en/latest/containers/get-started/quickstart-configure-deploy-dlc.html
   * @see https://awsdocs-neuron.readthedocs-hosted.com/en/latest/vllm-neuron/docs/getting-started/setup-guide.html
   */
  readonly image: string;
  /**
   * The vLLM release `image` runs: it decides what the workers' command line may use (`kv_producer` /
   * `kv_consumer` roles since 0.22.1, `kv_both` before).
   * @default - the release the image's tag names (`vllm:0.19.1-gpu-...`, `vllm-openai:v0.26.0`), else
   * VllmVersion.BUNDLED (the library's own worker image)
   */
  readonly vllmVersion?: VllmVersion;
  /**
   * Image pull policy of every container.
   * @default - Kubernetes' default (IfNotPresent for tagged images)
   */
  readonly imagePullPolicy?: string;
  /**
   * Longest sequence (prompt plus output) served, tokens (vLLM `--max-model-len`).
   * @default - the model's maximum context
   */
  readonly maxContext?: number;
  /**
   * Precision of the weights. FP8 on a BF16 checkpoint is quantized by vLLM at load time
   * (`--quantization fp8`); other precisions need a checkpoint stored in them (`prequantizedCheckpoint`).
   * Trainium pools run the native precision, or FP8 from a calibrated static-FP8 checkpoint only
   * (vLLM Neuron quantizes nothing at load time and takes no `--quantization`).
   * @see https://awsdocs-neuron.readthedocs-hosted.com/en/latest/vllm-neuron/docs/guides/features-guide.html
   * @default - the model's native checkpoint precision
   */
  readonly weightPrecision?: Precision;
  /**
   * The checkpoint at `modelSource` is already stored at `weightPrecision` (e.g. an FP8 or AWQ
   * repository): vLLM reads the scheme from its config, so no `--quantization` flag is passed.
   * @default false
   */
  readonly prequantizedCheckpoint?: boolean;
  /**
   * Precision of the KV cache (vLLM `--kv-cache-dtype`); prefill and decode must agree, since NIXL
   * copies blocks as they are.
   * @default Precision.BF16
   */
  readonly kvCachePrecision?: Precision;
  /**
   * Paged KV block size, tokens (vLLM `--block-size`); also the block size of the router's prefix index.
   * An MLA model (DeepSeek-V3/R1, Kimi-K2) on H100, H200, B200 or GB200 needs a multiple of 64 (32 also on
   * Blackwell): vLLM's MLA attention backends (FlashMLA, FlashInfer MLA) take 64-token pages and override
   * or refuse any other size.
   * @default - 64 for an MLA model on H100, H200, B200 or GB200 (what vLLM's MLA backend forces there); 16 otherwise
   * @see https://docs.vllm.ai/en/latest/configuration/engine_args.html#-block-size
   */
  readonly kvBlockSize?: number;
  /**
   * Name of the served model in the OpenAI API (vLLM `--served-model-name`).
   * @default - the model's Hugging Face id
   */
  readonly servedModelName?: string;
  /**
   * How KV cache moves from prefill to decode.
   * @default KvTransfer.AUTO
   */
  readonly kvTransfer?: KvTransfer;
  /**
   * Where workers cache model files.
   * @default ModelCache.nodeLocal()
   */
  readonly modelCache?: ModelCache;
  /**
   * Base name of every object (DNS label; a DisaggregatedInference's pools add '-prefill', '-decode', '-router').
   * @default - the model name with dots replaced by dashes
   */
  readonly name?: string;
  /**
   * Namespace of every object.
   * @default - the chart's namespace
   */
  readonly namespace?: string;
  /**
   * Availability Zone to pin every worker to (EFA traffic stays within one zone).
   * @default - no zone pin; workers prefer the zone of the deployment's other pods
   */
  readonly zone?: string;
  /**
   * Annotations of the workers' ServiceAccount (e.g. `eks.amazonaws.com/role-arn` for IRSA access to an
   * S3 model source), and of the router's when it downloads its tokenizer from an S3 model source. On an
   * InferenceCluster no annotation is needed: `addWorkload` grants the S3 prefix through Pod Identity.
   * @default - none
   */
  readonly serviceAccountAnnotations?: { [key: string]: string };
  /**
   * Whether workers with EFA request 2 MiB hugepages (`hugepages-2Mi`, their share of what the EFA
   * driver reserves on the node), which libfabric's EFA provider uses for its buffers. Turn it off for
   * pools on Karpenter: Karpenter cannot know that a new node will offer hugepages, so pods that request
   * them never get a node. Off, the pods set `FI_EFA_USE_HUGE_PAGE=0` and libfabric uses regular pages
   * (a small cost on small messages; KV blocks are large).
   * @default true
   * @see https://ofiwg.github.io/libfabric/main/man/fi_efa.7.html
   */
  readonly efaHugePages?: boolean;
  /**
   * Run worker containers as UID/GID 1000 with `runAsNonRoot`. vLLM images run as root and hostPath
   * model caches are created root-owned, so enable it only with an image whose user owns its home and
   * with `ModelCache.podLocal()` (emptyDir honours `fsGroup`). The router always runs non-root.
   * @default false
   */
  readonly runWorkersAsNonRoot?: boolean;
  /**
   * Sustained download rate of the model checkpoint into the cache, GB/s; sizes the startup probe
   * (checkpoint bytes / rate + `startupOverheadSeconds`).
   * @default 0.5
   */
  readonly modelLoadBandwidthGBps?: number;
  /**
   * Seconds a worker needs after the download: loading into GPU memory, profiling, CUDA graph capture,
   * NIXL registration. Trainium workers also compile the model on first start (about 15-20 minutes for
   * a 70B model, Neuron's Llama 3.3 70B tutorial), so their default adds 1,200 s.
   * @default 600 (1,800 for Trainium pools)
   */
  readonly startupOverheadSeconds?: number;
  /**
   * The longest output a request may ask for, tokens. Sizes how long a worker leaving its pool (a
   * scale-down, a rollout, a node drain) may take to finish its in-flight requests: the pods'
   * `terminationGracePeriodSeconds` is the drain's DNS wait plus `maxOutputTokens x` the TPOT SLO
   * (`DisaggregatedInference.slo`, else 0.1 s) `x 1.5`, plus a margin; a pod that drains sooner
   * leaves sooner.
   * @default - maxContext
   */
  readonly maxOutputTokens?: number;
  /**
   * Which pods may connect to the deployment's pods (NetworkPolicies). By default only the deployment's
   * own pods reach the workers; name your Prometheus in `metricsFrom` if it scrapes them.
   * @default NetworkIsolation.workersBehindRouter()
   */
  readonly networkIsolation?: NetworkIsolation;
}
