// SLO autoscaling of the prefill and decode pools (issue 24): the router's `autoscaling` block, KEDA
// ScaledObjects and autoscaling/v2 HPAs on its pressure, validated against KEDA's CRD and the core
// schema, and the drain of a leaving pod (preStop drain-wait, grace period from the TPOT SLO).
import * as fs from 'fs';
import { Chart, Testing } from 'cdk8s';
import {
  ENGINE_SCHEMA, defaultProps, deepseekEpPdProps, find, reportSkipped, routerConfigValidator, synthChart, synthInference, validateManifests,
  wideEpProps,
} from './util';
import { AcceleratedInstanceType, Autoscaler, DataParallelEndpoints, DisaggregatedInference, ExpertParallelPool, GatewayExposure, ModelArchitecture, PoolAutoscaling } from '../../src';
import { DRAIN_DNS_SECONDS, DRAIN_MARGIN_SECONDS, NIXL_KV_HOLD_SECONDS } from '../../src/k8s/private/drain';

const SLO = { ttftSeconds: 2, tpotSeconds: 0.05 };

/** Default P/D props with autoscaling on one or both pools (replicas left to the autoscaler). */
function scaled(prefill?: PoolAutoscaling, decode?: PoolAutoscaling, extra: Record<string, unknown> = {}) {
  const base = defaultProps();
  return defaultProps({
    slo: SLO,
    prefill: { instanceType: base.prefill!.instanceType, tensorParallel: 4, ...(prefill ? { autoscaling: prefill } : { replicas: 2 }) },
    decode: { instanceType: base.decode!.instanceType, tensorParallel: 4, ...(decode ? { autoscaling: decode } : { replicas: 2 }) },
    ...extra,
  });
}

function routerFile(manifests: any[]): any {
  const cm = find(manifests, 'ConfigMap', '-router-config');
  return JSON.parse(Object.values(cm.data as Record<string, string>)[0]);
}

function preStop(c: any): string {
  return c.lifecycle.preStop.exec.command[2];
}

describe('autoscaling: KEDA ScaledObjects', () => {
  test('each autoscaled pool gets a ScaledObject on the router\'s /scaling pressure, valid against KEDA 2.20\'s CRD', () => {
    // GIVEN both pools autoscaled with KEDA (the default)
    const decodeScaling = { minReplicas: 2, maxReplicas: 8, targetPressure: 0.7, scaleDownStabilizationSeconds: 600 };
    const { manifests, inference } = synthInference(scaled({ maxReplicas: 4 }, decodeScaling));
    // THEN one ScaledObject per pool targets its Deployment
    const objects = manifests.filter(m => m.kind === 'ScaledObject');
    expect(objects.map(o => o.metadata.name).sort()).toEqual([inference.decodeServiceName, inference.prefillServiceName]);
    const decode = find(manifests, 'ScaledObject', '-decode');
    expect(decode.apiVersion).toBe('keda.sh/v1alpha1');
    expect(decode.metadata.namespace).toBe('inference');
    expect(decode.spec.scaleTargetRef).toEqual({ apiVersion: 'apps/v1', kind: 'Deployment', name: inference.decodeServiceName });
    expect(decode.spec).toMatchObject({ minReplicaCount: 2, maxReplicaCount: 8, pollingInterval: 15 });
    expect(decode.spec.idleReplicaCount).toBeUndefined();
    expect(decode.spec.advanced.horizontalPodAutoscalerConfig.behavior).toEqual({
      scaleUp: { stabilizationWindowSeconds: 0 }, scaleDown: { stabilizationWindowSeconds: 600 },
    });
    expect(decode.spec.triggers).toEqual([{
      type: 'metrics-api',
      name: 'slo-pressure',
      metricType: 'Value',
      metadata: {
        url: `http://${inference.routerServiceName}.inference.svc.cluster.local:80/scaling`,
        format: 'json',
        valueLocation: 'pools.decode.pressure',
        targetValue: '0.7',
        activationTargetValue: '0',
      },
    }]);
    const prefill = find(manifests, 'ScaledObject', '-prefill');
    expect(prefill.spec).toMatchObject({ minReplicaCount: 1, maxReplicaCount: 4 });
    expect(prefill.spec.triggers[0].metadata).toMatchObject({ valueLocation: 'pools.prefill.pressure', targetValue: '0.95' });
    // AND the Deployments leave the count to the autoscaler
    expect(find(manifests, 'Deployment', '-decode').spec.replicas).toBeUndefined();
    expect(find(manifests, 'Deployment', '-prefill').spec.replicas).toBeUndefined();
    // AND every object validates (ScaledObjects against the pinned KEDA CRD)
    const result = validateManifests(manifests);
    reportSkipped(result);
    expect(result.errors).toEqual([]);
  });

  test('a ScaledObject that breaks KEDA\'s schema is caught (the validation can fail)', () => {
    const { manifests } = synthInference(scaled(undefined, { maxReplicas: 3 }));
    const broken = JSON.parse(JSON.stringify(find(manifests, 'ScaledObject', '-decode')));
    broken.spec.maxReplicaCount = 'three';
    delete broken.spec.triggers[0].type;
    const result = validateManifests([broken]);
    if (result.skipped.length > 0) {
      reportSkipped(result);
      return;
    }
    expect(result.errors.join('\n')).toMatch(/ScaledObject\/.*maxReplicaCount|must be integer/);
    expect(result.errors.join('\n')).toMatch(/type/);
  });

  test('scale to zero: idleReplicaCount 0 after idleSecondsBeforeZero (KEDA cooldownPeriod), minReplicas while active', () => {
    const { manifests, inference } = synthInference(scaled({ maxReplicas: 4, minReplicas: 2, scaleToZero: true, idleSecondsBeforeZero: 900 },
      { maxReplicas: 4, scaleToZero: true }));
    // AND the router holds requests for a pool coming back (up to its request timeout), warning when a cold start takes longer
    expect(routerFile(manifests).router.queueTimeoutSeconds).toBe(600);
    expect(inference.warnings.some(w => /^disagg:coldStart: a pool scaled to zero comes back in about \d+ s/.test(w))).toBe(true);
    const prefill = find(manifests, 'ScaledObject', '-prefill');
    expect(prefill.spec).toMatchObject({ idleReplicaCount: 0, minReplicaCount: 2, maxReplicaCount: 4, cooldownPeriod: 900 });
    const decode = find(manifests, 'ScaledObject', '-decode');
    expect(decode.spec).toMatchObject({ idleReplicaCount: 0, minReplicaCount: 1, cooldownPeriod: 600 });
    // AND it goes idle only without work: an idle pool's pressure stays above 0 (the next request's own
    // step), so the pressure activates above 1 (held requests at zero: 1 + held) and work in flight keeps it active
    const activation = (so: any) => so.spec.triggers.map((t: any) => [t.name, t.metadata.valueLocation, t.metadata.activationTargetValue]);
    expect(activation(decode)).toEqual([
      ['slo-pressure', 'pools.decode.pressure', '1'], ['work-in-flight', 'pools.decode.runningSequences', '0'],
    ]);
    expect(activation(prefill)).toEqual([
      ['slo-pressure', 'pools.prefill.pressure', '1'], ['work-in-flight', 'pools.prefill.waitingPromptTokens', '0'],
    ]);
    expect(Number(prefill.spec.triggers[1].metadata.targetValue)).toBeGreaterThan(1e8);
    const result = validateManifests(manifests.filter(m => m.kind === 'ScaledObject'));
    reportSkipped(result);
    expect(result.errors).toEqual([]);
  });

  test('a fast cold start fits the router\'s hold without a warning', () => {
    // GIVEN a small model that loads in seconds
    const base = defaultProps();
    const { manifests, inference } = synthInference(defaultProps({
      model: ModelArchitecture.LLAMA_3_1_8B,
      modelSource: undefined,
      startupOverheadSeconds: 60,
      slo: SLO,
      prefill: { instanceType: base.prefill!.instanceType, tensorParallel: 1, autoscaling: { maxReplicas: 2, scaleToZero: true } },
      decode: { instanceType: base.decode!.instanceType, tensorParallel: 1, replicas: 1 },
    }));
    const hold = routerFile(manifests).router.queueTimeoutSeconds;
    expect(hold).toBeGreaterThan(180 + 60);
    expect(hold).toBeLessThan(600);
    expect(inference.warnings.filter(w => w.startsWith('disagg:coldStart'))).toEqual([]);
  });

  test('a pool whose replica spans nodes scales its LeaderWorkerSet groups', () => {
    const base = defaultProps();
    const { manifests, inference } = synthInference(defaultProps({
      slo: { ttftSeconds: 2, tpotSeconds: 0.1 },
      decode: { instanceType: base.decode!.instanceType, tensorParallel: 8, pipelineParallel: 2, autoscaling: { maxReplicas: 3 } },
    }));
    const so = find(manifests, 'ScaledObject', '-decode');
    expect(so.spec.scaleTargetRef).toEqual({ apiVersion: 'leaderworkerset.x-k8s.io/v1', kind: 'LeaderWorkerSet', name: inference.decodeServiceName });
    expect(find(manifests, 'LeaderWorkerSet', '-decode').spec.replicas).toBeUndefined();
    const result = validateManifests(manifests.filter(m => ['ScaledObject', 'LeaderWorkerSet'].includes(m.kind)));
    reportSkipped(result);
    expect(result.errors).toEqual([]);
  });

  test('an expert-parallel side scales its groups (the LeaderWorkerSet\'s scale subresource)', () => {
    const { manifests, inference } = synthInference(deepseekEpPdProps({ autoscaling: { maxReplicas: 4, minReplicas: 1 } },
      { slo: { ttftSeconds: 3, tpotSeconds: 0.1 } }));
    const so = find(manifests, 'ScaledObject', '-decode');
    expect(so.spec.scaleTargetRef).toEqual({ apiVersion: 'leaderworkerset.x-k8s.io/v1', kind: 'LeaderWorkerSet', name: inference.decodeServiceName });
    expect(so.spec.maxReplicaCount).toBe(4);
    expect(find(manifests, 'LeaderWorkerSet', '-decode').spec.replicas).toBeUndefined();
    expect(manifests.filter(m => m.kind === 'ScaledObject')).toHaveLength(1);
  });
});

describe('autoscaling: plain HPAs', () => {
  test('Autoscaler.HPA gives autoscaling/v2 HPAs on the external pressure metric, valid against the core schema', () => {
    const { manifests, inference } = synthInference(scaled({ maxReplicas: 4 }, { maxReplicas: 6, scaleUpStabilizationSeconds: 30 },
      { autoscaler: Autoscaler.HPA }));
    expect(manifests.some(m => m.kind === 'ScaledObject')).toBe(false);
    const hpa = find(manifests, 'HorizontalPodAutoscaler', '-decode');
    expect(hpa.apiVersion).toBe('autoscaling/v2');
    expect(hpa.spec).toEqual({
      scaleTargetRef: { apiVersion: 'apps/v1', kind: 'Deployment', name: inference.decodeServiceName },
      minReplicas: 1,
      maxReplicas: 6,
      metrics: [{
        type: 'External',
        external: {
          metric: { name: 'disagg_router_pool_slo_pressure', selector: { matchLabels: { pool: 'decode', service: inference.routerServiceName } } },
          target: { type: 'Value', value: '0.95' },
        },
      }],
      behavior: { scaleUp: { stabilizationWindowSeconds: 30 }, scaleDown: { stabilizationWindowSeconds: 300 } },
    });
    const result = validateManifests(manifests.filter(m => m.kind === 'HorizontalPodAutoscaler'));
    expect(result.errors).toEqual([]);
    // AND a broken one fails the same validation
    const broken = JSON.parse(JSON.stringify(hpa));
    broken.spec.maxReplicas = 'six';
    expect(validateManifests([broken]).errors).toHaveLength(1);
  });
  test('two deployments in one namespace read their own router\'s pressure, not each other\'s', () => {
    // GIVEN two autoscaled deployments of the same model in one chart (one namespace)
    const { manifests, result } = synthChart((chart) => ['llama-a', 'llama-b'].map((name) =>
      new DisaggregatedInference(chart, name, scaled({ maxReplicas: 4 }, { maxReplicas: 6 }, { name, autoscaler: Autoscaler.HPA }))));
    const hpas = manifests.filter(m => m.kind === 'HorizontalPodAutoscaler');
    expect(hpas).toHaveLength(4);
    // THEN each HPA selects its pool of its own router's series (the router labels gauges only with `pool`;
    // the Service scrape adds `service`), and no two HPAs share a selector
    for (const inference of result) {
      for (const pool of ['prefill', 'decode']) {
        const name = pool === 'prefill' ? inference.prefillServiceName : inference.decodeServiceName;
        const hpa = hpas.find(h => h.metadata.name === name);
        expect(hpa.spec.metrics[0].external.metric.selector).toEqual({ matchLabels: { pool, service: inference.routerServiceName } });
      }
    }
    const selectors = hpas.map(h => JSON.stringify(h.spec.metrics[0].external.metric.selector));
    expect(new Set(selectors).size).toBe(4);
    // AND the router Services the selectors name exist
    const services = manifests.filter(m => m.kind === 'Service').map(m => m.metadata.name);
    for (const inference of result) {
      expect(services).toContain(inference.routerServiceName);
    }
    expect(validateManifests(hpas).errors).toEqual([]);
  });
});

describe('autoscaling: the router\'s capacity model', () => {
  test('the router configuration carries the SLO and each pool\'s capacity from the sizing model', () => {
    const { manifests, inference } = synthInference(scaled({ maxReplicas: 4 }, { maxReplicas: 4 }));
    const file = routerFile(manifests);
    expect(file.autoscaling.slo).toEqual(SLO);
    const { prefill, decode } = file.autoscaling;
    // Llama-3.3-70B FP8 on 4 x H200: thousands of prompt tokens per second; a decode step of milliseconds that grows with the batch
    expect(prefill.tokensPerSecond).toBeGreaterThan(5000);
    expect(prefill.tokensPerSecond).toBeLessThan(200000);
    expect(prefill.fixedSeconds).toBeGreaterThan(0);
    expect(prefill.fixedSeconds).toBeLessThan(0.1);
    expect(decode.stepSecondsBase).toBeGreaterThan(0.001);
    expect(decode.stepSecondsBase).toBeLessThan(SLO.tpotSeconds);
    expect(decode.stepSecondsPerSequence).toBeGreaterThan(0);
    expect(decode.stepSecondsPerSequence).toBeLessThan(decode.stepSecondsBase);
    // AND the sequences a decode endpoint holds: the plan's concurrency (what the simulator counts too)
    expect(decode.maxSequences).toBe(inference._router.pools.find(p => p.role === 'decode')!.maxConcurrencyPerReplica);
    expect(decode.maxSequences).toBeGreaterThan(1);
    expect(JSON.parse(inference.routerConfig).autoscaling).toEqual(file.autoscaling);
    // AND it is what the engine schema accepts, once the schema has the block (the signals side adds it)
    const schema = JSON.parse(fs.readFileSync(ENGINE_SCHEMA, 'utf8'));
    if (schema.properties.autoscaling !== undefined) {
      const validate = routerConfigValidator();
      expect(validate(file) ? [] : validate.errors).toEqual([]);
    }
  });

  test('without slo there is no block (the router uses its defaults) and no autoscaler', () => {
    const { manifests } = synthInference(defaultProps());
    expect(routerFile(manifests).autoscaling).toBeUndefined();
    expect(routerFile(manifests).router.queueTimeoutSeconds).toBeUndefined();
    expect(manifests.some(m => ['ScaledObject', 'HorizontalPodAutoscaler'].includes(m.kind))).toBe(false);
    expect(find(manifests, 'Deployment', '-decode').spec.replicas).toBe(2);
  });

  test('slo alone (no autoscaling) writes the block, so the signals are against the user\'s SLO', () => {
    const { manifests } = synthInference(defaultProps({ slo: SLO }));
    expect(routerFile(manifests).autoscaling.slo).toEqual(SLO);
    expect(manifests.some(m => m.kind === 'ScaledObject')).toBe(false);
  });
});

describe('autoscaling: errors name the field, the value and the fix', () => {
  const base = defaultProps();
  test.each<[string, () => any, RegExp]>([
    ['no slo', () => defaultProps({ decode: { instanceType: base.decode!.instanceType, tensorParallel: 4, autoscaling: { maxReplicas: 2 } } }),
      /'decode.autoscaling' scales on the pool's SLO pressure.*set 'slo/],
    ['replicas and autoscaling', () => defaultProps({ slo: SLO, decode: { ...base.decode!, autoscaling: { maxReplicas: 4 } } }),
      /'decode.replicas' \(2\) and 'decode.autoscaling' both set the pool's size.*remove 'replicas'/],
    ['min > max', () => scaled(undefined, { minReplicas: 5, maxReplicas: 4 }), /'decode.autoscaling.minReplicas' \(5\) exceeds 'maxReplicas' \(4\)/],
    ['max 0', () => scaled({ maxReplicas: 0 }), /'prefill.autoscaling.maxReplicas' \(0\) must be a positive integer/],
    ['min 0', () => scaled({ minReplicas: 0, maxReplicas: 2 }), /'prefill.autoscaling.minReplicas' \(0\).*scaleToZero: true/],
    ['fractional min', () => scaled({ minReplicas: 1.5, maxReplicas: 2 }), /'prefill.autoscaling.minReplicas' \(1.5\) must be a positive integer/],
    ['target above 1', () => scaled({ maxReplicas: 2, targetPressure: 1.2 }), /'prefill.autoscaling.targetPressure' \(1.2\) must be in \(0, 1\]/],
    ['target 0', () => scaled({ maxReplicas: 2, targetPressure: 0 }), /'prefill.autoscaling.targetPressure' \(0\)/],
    ['window too long', () => scaled({ maxReplicas: 2, scaleDownStabilizationSeconds: 7200 }), /'prefill.autoscaling.scaleDownStabilizationSeconds' \(7200\).*0 to 3600/],
    ['negative window', () => scaled({ maxReplicas: 2, scaleUpStabilizationSeconds: -1 }), /'prefill.autoscaling.scaleUpStabilizationSeconds' \(-1\)/],
    ['idle time without scale to zero', () => scaled({ maxReplicas: 2, idleSecondsBeforeZero: 60 }), /'prefill.autoscaling.idleSecondsBeforeZero' \(60\) applies only with 'scaleToZero: true'/],
    ['idle time 0', () => scaled({ maxReplicas: 2, scaleToZero: true, idleSecondsBeforeZero: 0 }), /'prefill.autoscaling.idleSecondsBeforeZero' \(0\) must be a positive/],
    ['scale to zero with an HPA', () => scaled(undefined, { maxReplicas: 2, scaleToZero: true }, { autoscaler: Autoscaler.HPA }),
      /'decode.autoscaling.scaleToZero' needs Autoscaler.KEDA/],
    ['decode to zero behind an InferencePool', () => scaled(undefined, { maxReplicas: 2, scaleToZero: true },
      { gateway: GatewayExposure.inferencePool({ gateway: { name: 'gw' } }) }), /'decode.autoscaling.scaleToZero' with GatewayExposure.inferencePool/],
    ['slo not positive', () => scaled({ maxReplicas: 2 }, undefined, { slo: { ttftSeconds: 0, tpotSeconds: 0.05 } }), /'slo.ttftSeconds' \(0\) must be a positive number/],
    ['tpot slo NaN', () => defaultProps({ slo: { ttftSeconds: 1, tpotSeconds: NaN } }), /'slo.tpotSeconds' \(NaN\)/],
    ['ttft slo no idle replica meets', () => defaultProps({ slo: { ttftSeconds: 0.001, tpotSeconds: 0.05 } }),
      /'slo.ttftSeconds' \(0.001\) is below what an idle prefill replica can do: a 512-token prompt.*raise the SLO above/],
    ['tpot slo no idle replica meets', () => defaultProps({ slo: { ttftSeconds: 2, tpotSeconds: 0.0005 } }),
      /'slo.tpotSeconds' \(0.0005\) is below what an idle decode replica can do.*raise the SLO above/],
    ['maxOutputTokens above maxContext', () => defaultProps({ maxOutputTokens: 40000 }), /'maxOutputTokens' \(40000\) must be a whole number from 1 to maxContext \(32768\)/],
  ])('%s', (_name, props, message) => {
    expect(() => synthInference(props())).toThrow(message);
  });

  test('KEDA needs a namespace (it polls the router from its own)', () => {
    const bare = (props: any) => () => new DisaggregatedInference(new Chart(Testing.app(), 'bare'), 'Llama', props);
    expect(bare(scaled({ maxReplicas: 2 }))).toThrow(/Autoscaler.KEDA needs a namespace/);
    // an HPA reads a metric, not a URL: fine without one
    expect(bare(scaled({ maxReplicas: 2 }, undefined, { autoscaler: Autoscaler.HPA }))).not.toThrow();
  });

  test('an expert-parallel side with replicas and autoscaling names its field', () => {
    expect(() => synthInference(deepseekEpPdProps({ replicas: 2, autoscaling: { maxReplicas: 4 } }, { slo: { ttftSeconds: 3, tpotSeconds: 0.1 } })))
      .toThrow(/'decodeExpertParallel.replicas' \(2\) and 'decodeExpertParallel.autoscaling'/);
  });

  test('a stand-alone ExpertParallelPool has no router to scale on', () => {
    expect(() => synthChart(c => new ExpertParallelPool(c, 'Ep', wideEpProps({ autoscaling: { maxReplicas: 2 } }))))
      .toThrow(/'autoscaling' scales on the SLO pressure that the disagg router computes.*DisaggregatedInference/);
  });
});

describe('drain: scale-down that loses nothing', () => {
  test('decode workers wait out the DNS refresh, then drain-wait on their server; the grace follows the TPOT SLO and maxOutputTokens', () => {
    const { manifests } = synthInference(defaultProps({ slo: SLO, maxOutputTokens: 4096 }));
    const pod = find(manifests, 'Deployment', '-decode').spec.template.spec;
    const grace = Math.ceil(DRAIN_DNS_SECONDS + 1.5 * 4096 * SLO.tpotSeconds + DRAIN_MARGIN_SECONDS);
    expect(pod.terminationGracePeriodSeconds).toBe(grace);
    const hook = preStop(pod.containers[0]);
    expect(hook).toMatch(new RegExp(`^sleep ${DRAIN_DNS_SECONDS}; `));
    expect(hook).toContain(`disagg-engine drain-wait --metrics-url "http://127.0.0.1:8000/metrics" --timeout-s ${grace - DRAIN_DNS_SECONDS - DRAIN_MARGIN_SECONDS} --quiet-s 2`);
    expect(hook).toContain('command -v disagg-engine');
  });

  test('an autoscaled decode pool without maxOutputTokens warns that its drains may take over an hour', () => {
    // GIVEN decode autoscaled, a 32k context and a 100 ms TPOT SLO: a maxContext-long answer at 1.5 x the SLO takes 4,915 s
    const { inference } = synthInference(scaled(undefined, { maxReplicas: 4 }, { slo: { ttftSeconds: 2, tpotSeconds: 0.1 } }));
    // THEN the warning names the grace, why, and the fix
    expect(inference.warnings.filter(w => w.startsWith('disagg:longDrain'))).toEqual([
      expect.stringMatching(/^disagg:longDrain: a leaving decode pod may take up to 4941 s to finish its streams .* set 'maxOutputTokens'/),
    ]);
    // AND with maxOutputTokens, or under an hour (the 50 ms SLO: 2,483 s), it does not
    expect(synthInference(scaled(undefined, { maxReplicas: 4 }, { maxOutputTokens: 4096 })).inference.warnings
      .filter(w => w.startsWith('disagg:longDrain'))).toEqual([]);
    expect(synthInference(scaled(undefined, { maxReplicas: 4 })).inference.warnings.filter(w => w.startsWith('disagg:longDrain'))).toEqual([]);
  });

  test('without an SLO the grace assumes 0.1 s per token over maxContext', () => {
    const { manifests } = synthInference(defaultProps());
    const pod = find(manifests, 'Deployment', '-decode').spec.template.spec;
    expect(pod.terminationGracePeriodSeconds).toBe(Math.ceil(DRAIN_DNS_SECONDS + 1.5 * 32768 * 0.1 + DRAIN_MARGIN_SECONDS));
  });

  test('prefill workers add vLLM\'s KV hold time, so decode pods can still pull finished prompts', () => {
    const { manifests } = synthInference(defaultProps({ slo: SLO, maxOutputTokens: 1024 }));
    const pod = find(manifests, 'Deployment', '-prefill').spec.template.spec;
    expect(pod.terminationGracePeriodSeconds).toBeGreaterThan(DRAIN_DNS_SECONDS + NIXL_KV_HOLD_SECONDS + DRAIN_MARGIN_SECONDS);
    expect(pod.terminationGracePeriodSeconds).toBeLessThan(DRAIN_DNS_SECONDS + NIXL_KV_HOLD_SECONDS + DRAIN_MARGIN_SECONDS + 60);
    // AND it waits until the decode pods have read every finished prompt's KV blocks (vLLM's KV use
    // stays above 0 while it holds them), which decode pods do not wait for
    expect(preStop(pod.containers[0])).toContain('--quiet-s 5 --held-kv');
    const decode = find(manifests, 'Deployment', '-decode').spec.template.spec;
    expect(preStop(decode.containers[0])).not.toContain('--held-kv');
  });

  test('a LeaderWorkerSet worker pod waits on its leader\'s server; the leader on its own', () => {
    const base = defaultProps();
    const { manifests } = synthInference(defaultProps({
      decode: { instanceType: base.decode!.instanceType, tensorParallel: 8, pipelineParallel: 2 },
    }));
    const lwt = find(manifests, 'LeaderWorkerSet', '-decode').spec.leaderWorkerTemplate;
    expect(preStop(lwt.leaderTemplate.spec.containers[0])).toContain('"http://127.0.0.1:8000/metrics"');
    expect(preStop(lwt.workerTemplate.spec.containers[0])).toContain('"http://$LWS_LEADER_ADDRESS:8000/metrics"');
    expect(lwt.workerTemplate.spec.terminationGracePeriodSeconds).toBe(lwt.leaderTemplate.spec.terminationGracePeriodSeconds);
  });

  test('a per-rank expert-parallel pod drains every rank\'s server at once', () => {
    const { manifests } = synthInference(deepseekEpPdProps({ endpoints: DataParallelEndpoints.PER_RANK, tensorParallel: 2 }));
    const lwt = find(manifests, 'LeaderWorkerSet', '-decode').spec.leaderWorkerTemplate;
    const hook = preStop(lwt.workerTemplate.spec.containers[0]);
    for (const port of [8000, 8001, 8002, 8003]) {
      expect(hook).toContain(`"http://127.0.0.1:${port}/metrics"`);
    }
    expect(hook).toMatch(/ & .* & wait$/);
  });

  test('every pool keeps a PodDisruptionBudget of one at a time', () => {
    const { manifests, inference } = synthInference(scaled({ maxReplicas: 3 }, { maxReplicas: 3 }));
    for (const name of [inference.prefillServiceName, inference.decodeServiceName]) {
      const pdb = manifests.find(m => m.kind === 'PodDisruptionBudget' && m.metadata.name === name);
      expect(pdb.spec.maxUnavailable).toBe(1);
    }
  });
});

test('ModelArchitecture stays importable next to the autoscaling types', () => {
  expect(ModelArchitecture.LLAMA_3_3_70B.name).toBeDefined();
  expect(AcceleratedInstanceType.P5EN_48XLARGE.name).toBe('p5en.48xlarge');
});
