/**
 * A cdk8s app for an existing cluster: DeepSeek-V3 (FP8 checkpoint) with wide expert parallelism on
 * p5en.48xlarge: one group of 2 nodes x 8 H200 = 16 data-parallel attention ranks and EP16 MoE layers,
 * 32 redundant experts for load balancing, one vLLM API server per GPU behind a Gateway API Inference
 * Extension InferencePool, and a 1 TiB host-memory KV tier per node.
 *
 *   cd examples/cdk8s-wide-ep && npx ts-node main.ts     # writes dist/*.k8s.yaml here (README.md)
 *
 * No AWS credentials are needed. The cluster needs: p5en.48xlarge nodes with the NVIDIA and EFA device
 * plugins, the LeaderWorkerSet controller, Gateway API + Inference Extension CRDs, an Istio Gateway
 * named 'inference-gateway' in the namespace, and an endpoint picker Service 'deepseek-epp' (e.g. llm-d's).
 */
import * as path from 'path';
import { App, Chart, Size } from 'cdk8s';
import { AcceleratedInstanceType, ExpertParallelPool, KvTier, ModelArchitecture, Precision, TieredKvCache } from 'disagg';

const app = new App({ outdir: path.join(__dirname, 'dist') });
const chart = new Chart(app, 'deepseek-wide-ep', { namespace: 'inference' });

const pool = new ExpertParallelPool(chart, 'DeepSeek', {
  model: ModelArchitecture.DEEPSEEK_V3,
  // Replace with the engine image built from images/engine (EngineImage in a CDK app).
  image: process.env.DISAGG_ENGINE_IMAGE ?? 'registry.example.com/disagg/engine:0.1.0',
  instanceType: AcceleratedInstanceType.P5EN_48XLARGE,
  nodesPerGroup: 2,
  // 256 routed + 32 redundant experts = 18 per rank at EP16.
  redundantExperts: 32,
  kvCachePrecision: Precision.FP8,
  maxContext: 32768,
  inferencePool: { gateway: { name: 'inference-gateway' }, endpointPickerService: 'deepseek-epp' },
});

// Prefixes evicted from HBM stay in pinned host memory (vLLM native offloading, 128 GiB per rank).
new TieredKvCache(chart, 'KvCache', { tiers: [KvTier.hostMemory(Size.tebibytes(1))] }).attachTo(pool);

app.synth();
for (const warning of pool.warnings) {
  console.warn(`warning: ${warning}`);
}
console.log(`wrote ${path.join(__dirname, 'dist')}: ${pool.nodesPerGroup} nodes x ${pool.dataParallelLocal} ranks = EP${pool.expertParallelSize}, ` +
  `all-to-all ${pool.allToAllBackend.name}, ports ${pool.httpPorts.join(',')}`);
