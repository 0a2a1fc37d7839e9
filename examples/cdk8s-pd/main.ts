/**
 * A cdk8s app for an existing cluster: Llama-3.3-70B with FP8 weights and FP8 KV cache, disaggregated
 * prefill/decode on p5en.48xlarge (8 x H200, 16 EFA), behind the KV-aware router and a new Istio Gateway.
 *
 *   cd examples/cdk8s-pd && npx ts-node main.ts      # writes dist/*.k8s.yaml here (README.md)
 *
 * No AWS credentials are needed. The cluster needs: nodes labelled node.kubernetes.io/instance-type=p5en.48xlarge
 * with the NVIDIA and EFA device plugins, LeaderWorkerSet only for multi-node pools, Gateway API CRDs and
 * Istio for the Gateway, and a Secret 'hf-token' (key 'token') holding a Hugging Face token with access
 * to meta-llama.
 */
import * as path from 'path';
import { App, Chart } from 'cdk8s';
import { AcceleratedInstanceType, DisaggregatedInference, GatewayExposure, ModelArchitecture, ModelSource, Precision, RouterPolicy } from 'disagg';

const app = new App({ outdir: path.join(__dirname, 'dist') });
const chart = new Chart(app, 'llama-pd', { namespace: 'inference' });

const inference = new DisaggregatedInference(chart, 'Llama', {
  model: ModelArchitecture.LLAMA_3_3_70B,
  modelSource: ModelSource.huggingFace('meta-llama/Llama-3.3-70B-Instruct', { tokenSecret: { name: 'hf-token' } }),
  // Replace with the engine image built from images/engine (EngineImage in a CDK app).
  image: process.env.DISAGG_ENGINE_IMAGE ?? 'registry.example.com/disagg/engine:0.1.0',
  weightPrecision: Precision.FP8,
  kvCachePrecision: Precision.FP8,
  maxContext: 32768,
  // Prefill is compute-bound: two TP4 replicas fill one node. Decode is bandwidth-bound: two TP4
  // replicas on a second node, each with ~100 GiB of KV cache per GPU.
  prefill: { instanceType: AcceleratedInstanceType.P5EN_48XLARGE, replicas: 2, tensorParallel: 4 },
  decode: { instanceType: AcceleratedInstanceType.P5EN_48XLARGE, replicas: 2, tensorParallel: 4 },
  routerPolicy: RouterPolicy.KV_AWARE,
  gateway: GatewayExposure.gateway({ loadBalancerScheme: 'internal' }),
});

app.synth();
for (const warning of inference.warnings) {
  console.warn(`warning: ${warning}`);
}
console.log(`wrote ${path.join(__dirname, 'dist')}: prefill TP${inference.prefillTensorParallel}, decode TP${inference.decodeTensorParallel}, KV transfer NIXL/${inference.nixlBackend}`);
