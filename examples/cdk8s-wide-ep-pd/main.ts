/**
 * A cdk8s app for an existing cluster: DeepSeek-V3 (FP8 checkpoint, FP8 KV cache) with prefill/decode
 * disaggregation and wide expert parallelism on both sides, behind the project's KV-aware router:
 *
 * - prefill: one p5en.48xlarge per group, EP8 (8 data-parallel attention ranks, the MoE layers' all-to-all
 *   stays on NVLink inside the node), one vLLM API server per GPU;
 * - decode: two p5en.48xlarge per group, DP16/EP16, 32 redundant experts with EPLB, one API server per GPU;
 * - the all-to-all backend chosen for EFA (NCCL all-gather/reduce-scatter: DeepEP's internode kernels need
 *   GPU-initiated RDMA, which EFA does not offer), NIXL over LIBFABRIC (EFA) between the pools, 64-token
 *   KV blocks (what vLLM's MLA backend runs on H200 and B200) on both pools and in the router;
 * - the router with precise KV-aware routing: it discovers every data-parallel rank of every pod (ports
 *   8000-8007, KV events on 5557-5564) and routes on the tokenizer's token ids, so a request lands on the
 *   rank that holds its prefix; a failed KV pull is retried decode-only (KvLoadFailurePolicy.FAIL).
 *
 * The sizes follow llm-d's wide-EP guide (github.com/llm-d/llm-d, guides/wide-ep-lws/README.md): a DP=16
 * decode worker over two 8-GPU nodes (its current version also runs prefill at DP=16; an earlier one ran
 * one DP=8 prefill worker on one node, as here, which keeps the prefill's all-to-all off EFA).
 *
 *   cd examples/cdk8s-wide-ep-pd && npx ts-node main.ts                       # p5en.48xlarge (8 x H200)
 *   WIDE_EP_PD_INSTANCE_TYPE=p6-b200.48xlarge npx ts-node main.ts                    # 8 x B200, from the same folder
 *
 * Either writes dist/*.k8s.yaml in this folder (README.md). No AWS credentials are needed. The cluster
 * needs: three nodes of the instance type (labelled node.kubernetes.io/instance-type, one per pod: prefill
 * and decode never share a node) in one Availability Zone, with the NVIDIA and EFA device plugins; the
 * LeaderWorkerSet controller; Gateway API CRDs and an existing Gateway named 'inference-gateway' in the
 * namespace (the HTTPRoute targets the router); egress to huggingface.co for the weights and the router's
 * tokenizer (or a ModelSource from S3). DeepSeek-V3's first start takes 10-20 minutes per group.
 */
import * as path from 'path';
import { App, Chart } from 'cdk8s';
import {
  AcceleratedInstanceType, AllToAllBackend, DataParallelEndpoints, DisaggregatedInference, GatewayExposure, KvLoadFailurePolicy,
  KvTransfer, ModelArchitecture, Precision, RouterPolicy, RouterTokenizer,
} from 'disagg';

/** The instance types this example is written for. */
export const WIDE_EP_PD_INSTANCE_TYPES = [AcceleratedInstanceType.P5EN_48XLARGE, AcceleratedInstanceType.P6_B200_48XLARGE];

/**
 * Adds the wide-EP P/D deployment to `app` as the chart 'deepseek-wide-ep-pd' and returns it.
 *
 * @param instanceType p5en.48xlarge (default) or p6-b200.48xlarge
 */
export function wideEpPdChart(app: App, instanceType: AcceleratedInstanceType = AcceleratedInstanceType.P5EN_48XLARGE):
{ chart: Chart; inference: DisaggregatedInference } {
  if (!WIDE_EP_PD_INSTANCE_TYPES.includes(instanceType)) {
    throw new Error(`this example is sized for ${WIDE_EP_PD_INSTANCE_TYPES.map(t => t.name).join(' or ')}, not ${instanceType.name}`);
  }
  const chart = new Chart(app, 'deepseek-wide-ep-pd', { namespace: 'inference' });
  const inference = new DisaggregatedInference(chart, 'DeepSeek', {
    model: ModelArchitecture.DEEPSEEK_V3,
    // Replace with the engine image built from images/engine (EngineImage in a CDK app).
    image: process.env.DISAGG_ENGINE_IMAGE ?? 'registry.example.com/disagg/engine:0.1.0',
    // The published checkpoint is FP8 (block-quantized); FP8 KV cache halves MLA's latent cache.
    weightPrecision: Precision.FP8,
    kvCachePrecision: Precision.FP8,
    maxContext: 32768,
    prefillExpertParallel: {
      instanceType,
      // EP8 on one node: 256 routed experts / 8 = 32 per GPU; the all-to-all never leaves NVLink.
      nodesPerGroup: 1,
      allToAllBackend: AllToAllBackend.forInstanceType(instanceType),
      endpoints: DataParallelEndpoints.PER_RANK,
    },
    decodeExpertParallel: {
      instanceType,
      // DP16/EP16 over two nodes; (256 routed + 32 redundant) / 16 = 18 experts per GPU, EPLB moves hot ones.
      nodesPerGroup: 2,
      redundantExperts: 32,
      allToAllBackend: AllToAllBackend.forInstanceType(instanceType),
      endpoints: DataParallelEndpoints.PER_RANK,
    },
    kvTransfer: KvTransfer.NIXL_LIBFABRIC,
    // A failed pull fails the decode leg; the router retries it decode-only (it prefills locally).
    kvLoadFailurePolicy: KvLoadFailurePolicy.FAIL,
    routerPolicy: RouterPolicy.KV_AWARE,
    // Precise prefix routing: the router hashes the tokenizer's token ids as vLLM's KV events carry them.
    routerTokenizer: RouterTokenizer.fromModelSource(),
    gateway: GatewayExposure.existingGateway({ name: 'inference-gateway' }),
  });
  return { chart, inference };
}

/** The instance type named by WIDE_EP_PD_INSTANCE_TYPE, or p5en.48xlarge. */
export function instanceTypeFromEnv(value: string | undefined): AcceleratedInstanceType {
  if (value === undefined || value === '') return AcceleratedInstanceType.P5EN_48XLARGE;
  const found = WIDE_EP_PD_INSTANCE_TYPES.find(t => t.name === value);
  if (!found) {
    throw new Error(`WIDE_EP_PD_INSTANCE_TYPE (${value}) must be one of ${WIDE_EP_PD_INSTANCE_TYPES.map(t => t.name).join(', ')}`);
  }
  return found;
}

if (require.main === module) {
  const app = new App({ outdir: path.join(__dirname, 'dist') });
  const type = instanceTypeFromEnv(process.env.WIDE_EP_PD_INSTANCE_TYPE);
  const { inference } = wideEpPdChart(app, type);
  app.synth();
  for (const warning of inference.warnings) {
    console.warn(`warning: ${warning}`);
  }
  const pools = JSON.parse(inference.routerConfig).pools as Array<{ name: string; discovery: { ports?: number[] } }>;
  console.log(`wrote ${path.join(__dirname, 'dist')}: DeepSeek-V3 on ${type.name}, KV transfer NIXL/${inference.nixlBackend}, router ranks per pod: ` +
    pools.map(p => `${p.name} ${p.discovery.ports?.length ?? 1}`).join(', '));
}
