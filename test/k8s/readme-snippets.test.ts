// The code snippets of the README's workload sections (README.md, "Workloads (cdk8s)"), verbatim between the
// SNIPPET markers, so they compile and synthesize.
import { App, Chart, Size, Testing } from 'cdk8s';
import {
  AcceleratedInstanceType, DisaggregatedInference, ExpertParallelPool, GatewayExposure, KvStoreEndpoint, KvTier,
  ModelArchitecture, ModelSource, Monitoring, NetworkIsolation, Precision, TieredKvCache, TrafficSource,
} from '../../src';

function disaggregatedInference(app: App): Chart {
  // SNIPPET disaggregated-inference
  const chart = new Chart(app, 'llama', { namespace: 'inference' });
  new DisaggregatedInference(chart, 'Llama', {
    model: ModelArchitecture.LLAMA_3_3_70B,
    modelSource: ModelSource.huggingFace('meta-llama/Llama-3.3-70B-Instruct', { tokenSecret: { name: 'hf-token' } }),
    image: 'registry.example.com/disagg/engine:0.1.0',
    weightPrecision: Precision.FP8,
    kvCachePrecision: Precision.FP8,
    maxContext: 32768,
    prefill: { instanceType: AcceleratedInstanceType.P5EN_48XLARGE, replicas: 2, tensorParallel: 4 },
    decode: { instanceType: AcceleratedInstanceType.P5EN_48XLARGE, replicas: 2, tensorParallel: 4 },
    gateway: GatewayExposure.gateway(),
  });
  // END SNIPPET
  return chart;
}

function expertParallelPool(app: App): Chart {
  // SNIPPET expert-parallel-pool
  const chart = new Chart(app, 'deepseek', { namespace: 'inference' });
  new ExpertParallelPool(chart, 'DeepSeek', {
    model: ModelArchitecture.DEEPSEEK_V3,
    image: 'registry.example.com/disagg/engine:0.1.0',
    instanceType: AcceleratedInstanceType.P5EN_48XLARGE,
    nodesPerGroup: 2, // 2 x 8 H200 = EP16
    redundantExperts: 32, // EPLB: (256 + 32) / 16 = 18 experts per GPU
    maxContext: 32768,
    inferencePool: { gateway: { name: 'inference-gateway' } },
  });
  // END SNIPPET
  return chart;
}

function tieredKvCache(app: App): Chart {
  // SNIPPET tiered-kv-cache
  const chart = new Chart(app, 'llama-tiered', { namespace: 'inference' });
  const inference = new DisaggregatedInference(chart, 'Llama', {
    model: ModelArchitecture.LLAMA_3_3_70B,
    image: 'registry.example.com/disagg/engine:0.1.0',
    weightPrecision: Precision.FP8,
    kvCachePrecision: Precision.FP8,
    maxContext: 32768,
    prefill: { instanceType: AcceleratedInstanceType.P5EN_48XLARGE, replicas: 2, tensorParallel: 4 },
    decode: { instanceType: AcceleratedInstanceType.P5EN_48XLARGE, replicas: 2, tensorParallel: 4 },
  });
  new TieredKvCache(chart, 'KvCache', {
    tiers: [
      KvTier.hostMemory(Size.gibibytes(500)),
      KvTier.localNvme(Size.gibibytes(2000)),
      KvTier.remote(KvStoreEndpoint.engineKvStore({
        image: 'registry.example.com/disagg/engine-slim:0.1.0',
        memory: Size.gibibytes(64),
        disk: Size.tebibytes(4),
      })),
    ],
  }).attachTo(inference.decode);
  // END SNIPPET
  return chart;
}

function sizedInference(app: App): Chart {
  // SNIPPET size-for
  const chart = new Chart(app, 'llama-sized', { namespace: 'inference' });
  const tiers = [KvTier.hostMemory(Size.gibibytes(128))];
  const inference = new DisaggregatedInference(chart, 'Llama', {
    model: ModelArchitecture.LLAMA_3_3_70B,
    image: 'registry.example.com/disagg/engine:0.1.0',
    weightPrecision: Precision.FP8,
    kvCachePrecision: Precision.FP8,
    maxContext: 32768,
    prefill: { instanceType: AcceleratedInstanceType.P5EN_48XLARGE },
    decode: { instanceType: AcceleratedInstanceType.P5EN_48XLARGE },
    sizeFor: {
      slo: { ttftSeconds: 1, tpotSeconds: 0.05 },
      workload: { inputTokens: 2048, outputTokens: 256, conversationTurns: 4, requestsPerSecond: 2 },
      maxAccelerators: 8,
      kvCacheTiers: tiers,
    },
  });
  new TieredKvCache(chart, 'KvCache', { tiers }).attachTo(inference.prefill);
  // END SNIPPET
  return chart;
}

function autoscaledInference(app: App): Chart {
  // SNIPPET autoscaling
  const chart = new Chart(app, 'llama-autoscaled', { namespace: 'inference' });
  new DisaggregatedInference(chart, 'Llama', {
    model: ModelArchitecture.LLAMA_3_3_70B,
    image: 'registry.example.com/disagg/engine:0.1.0',
    weightPrecision: Precision.FP8,
    kvCachePrecision: Precision.FP8,
    maxContext: 32768,
    maxOutputTokens: 4096, // a leaving pod gets 4096 x 0.05 s x 1.5 to finish its streams
    slo: { ttftSeconds: 2, tpotSeconds: 0.05 },
    prefill: {
      instanceType: AcceleratedInstanceType.P5EN_48XLARGE,
      tensorParallel: 4,
      autoscaling: { maxReplicas: 4, scaleToZero: true },
    },
    decode: {
      instanceType: AcceleratedInstanceType.P5EN_48XLARGE,
      tensorParallel: 4,
      autoscaling: { minReplicas: 2, maxReplicas: 8, scaleDownStabilizationSeconds: 600 },
    },
    gateway: GatewayExposure.gateway(),
  });
  // END SNIPPET
  return chart;
}

function monitoredInference(app: App): Chart {
  // SNIPPET monitoring
  const chart = new Chart(app, 'llama-monitored', { namespace: 'inference' });
  new DisaggregatedInference(chart, 'Llama', {
    model: ModelArchitecture.LLAMA_3_3_70B,
    image: 'registry.example.com/disagg/engine:0.1.0',
    weightPrecision: Precision.FP8,
    kvCachePrecision: Precision.FP8,
    maxContext: 32768,
    slo: { ttftSeconds: 2, tpotSeconds: 0.05, targetShare: 0.99 }, // the burn-rate alerts' objective
    prefill: { instanceType: AcceleratedInstanceType.P5EN_48XLARGE, replicas: 2, tensorParallel: 4 },
    decode: { instanceType: AcceleratedInstanceType.P5EN_48XLARGE, replicas: 2, tensorParallel: 4 },
    monitoring: Monitoring.prometheusOperator({
      labels: { release: 'kube-prometheus-stack' }, // what kube-prometheus-stack's Prometheus selects
      instancePricePerHour: 63.3, // USD per instance-hour, for the cost dashboard
    }),
    // Let the Prometheus in namespace 'monitoring' scrape the workers.
    networkIsolation: NetworkIsolation.workersBehindRouter({ metricsFrom: [TrafficSource.namespace('monitoring')] }),
  });
  // END SNIPPET
  return chart;
}

describe('README snippets', () => {
  test.each([
    ['DisaggregatedInference', disaggregatedInference, ['Deployment', 'ConfigMap', 'Gateway', 'HTTPRoute']],
    ['ExpertParallelPool', expertParallelPool, ['LeaderWorkerSet', 'InferencePool', 'HTTPRoute']],
    ['TieredKvCache', tieredKvCache, ['StatefulSet', 'Deployment']],
    // Needs the engine addon (the planner runs at synth time), as test/k8s/size-for.test.ts does.
    ['sizeFor', sizedInference, ['Deployment', 'ConfigMap']],
    ['autoscaling', autoscaledInference, ['Deployment', 'ScaledObject', 'PodDisruptionBudget']],
    ['monitoring', monitoredInference, ['PodMonitor', 'ServiceMonitor', 'PrometheusRule', 'ConfigMap']],
  ])('%s synthesizes', (_name, snippet, kinds) => {
    // GIVEN the snippet WHEN synthesized
    const manifests = Testing.synth(snippet(Testing.app()));
    // THEN the kinds the README promises are there
    for (const kind of kinds) {
      expect(manifests.map(m => m.kind)).toContain(kind);
    }
  });
});
