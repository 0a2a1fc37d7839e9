import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { Testing } from 'cdk8s';
import { container, flag, reportSkipped, routerConfigValidator, synthChart, validateManifests, CRD_DIR, deepseekEpPdProps } from './util';
import { WIDE_EP_PD_INSTANCE_TYPES, instanceTypeFromEnv, wideEpPdChart } from '../../examples/cdk8s-wide-ep-pd/main';
import { AcceleratedInstanceType, DataParallelEndpoints, DisaggregatedInference, ExpertParallelPool, GatewayExposure } from '../../src';

// The wide-EP P/D example (examples/cdk8s-wide-ep-pd): DeepSeek-V3 with an EP8 prefill pool (one node)
// and a DP16/EP16 decode pool (two nodes), both with one vLLM API server per GPU, behind the router.

/** The example synthesized on `type`: its manifests and its DisaggregatedInference. */
function example(type: AcceleratedInstanceType) {
  const app = Testing.app();
  const { chart, inference } = wideEpPdChart(app, type);
  return { manifests: Testing.synth(chart), inference };
}

const lwsOf = (manifests: any[], suffix: string) => manifests.find(m => m.kind === 'LeaderWorkerSet' && m.metadata.name.endsWith(suffix));
const routerConfigOf = (manifests: any[]) => JSON.parse(manifests.find(m => m.kind === 'ConfigMap' && m.metadata.name.endsWith('-router-config')).data['config.json']);

/** One `vllm serve` a pod's script started: its GPUs and arguments. */
interface Launch { readonly gpus: string; readonly args: string[] }

/**
 * Runs a pod template's real start script under bash for LWS worker `index`, with `vllm` replaced by a
 * stub that records its GPUs and arguments, and returns the launches (one per local rank).
 */
function runPodScript(template: any, index: number, podIp: string, ranks: number): Launch[] {
  const c = template.spec.containers[0];
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'disagg-ep-script-'));
  try {
    const out = path.join(dir, 'out');
    fs.mkdirSync(out);
    fs.writeFileSync(path.join(dir, 'vllm'), `#!/bin/bash\nprintf '%s\\0' "$CUDA_VISIBLE_DEVICES" "$@" > "${out}/$$.part" && mv "${out}/$$.part" "${out}/$$"\n`, { mode: 0o755 });
    const [shell, dashC, script, argv0] = c.command;
    expect([shell, dashC, argv0]).toEqual(['/bin/bash', '-c', 'vllm']);
    spawnSync(shell, [dashC, script, argv0, ...c.args], {
      env: { PATH: `${dir}:${process.env.PATH}`, LWS_WORKER_INDEX: String(index), POD_IP: podIp },
      timeout: 20_000,
    });
    // The script exits when its first rank does; the others finish writing on their own.
    const deadline = Date.now() + 10_000;
    while (fs.readdirSync(out).filter(f => !f.endsWith('.part')).length < ranks && Date.now() < deadline) {
      spawnSync('sleep', ['0.05']);
    }
    return fs.readdirSync(out).filter(f => !f.endsWith('.part')).map(f => {
      const [gpus, ...args] = fs.readFileSync(path.join(out, f), 'utf8').split('\0').slice(0, -1);
      return { gpus, args };
    });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** The TCP port vLLM binds for a rank's KV events: the configured endpoint's port plus the data-parallel rank. */
function boundKvEventsPort(eventsConfig: Record<string, any>, rank: number): number {
  const port = Number(/:(\d+)$/.exec(eventsConfig.endpoint)![1]);
  return port + rank;
}

describe.each(WIDE_EP_PD_INSTANCE_TYPES.map(t => [t.name, t] as const))('wide-EP P/D example on %s', (_name, type) => {
  const { manifests, inference } = example(type);
  const pools = { prefill: inference.prefill as ExpertParallelPool, decode: inference.decode as ExpertParallelPool };

  test('synthesizes expert-parallel LeaderWorkerSets of the sizes llm-d runs (prefill EP8 on 1 node, decode EP16 on 2)', () => {
    expect(pools.prefill).toBeInstanceOf(ExpertParallelPool);
    expect(pools.decode).toBeInstanceOf(ExpertParallelPool);
    expect([pools.prefill.nodesPerGroup, pools.prefill.expertParallelSize]).toEqual([1, 8]);
    expect([pools.decode.nodesPerGroup, pools.decode.expertParallelSize]).toEqual([2, 16]);
    expect(lwsOf(manifests, '-prefill').spec.leaderWorkerTemplate.size).toBe(1);
    expect(lwsOf(manifests, '-decode').spec.leaderWorkerTemplate.size).toBe(2);
    // The all-to-all backend for EFA (NCCL), without the DeepEP-on-EFA warning
    for (const suffix of ['-prefill', '-decode']) {
      expect(flag(container(lwsOf(manifests, suffix), 'leaderTemplate').args, '--all2all-backend')).toBe('allgather_reducescatter');
    }
    expect(inference.warnings).toEqual([]);
  });

  test('every object validates against the LeaderWorkerSet, Gateway API and core Kubernetes schemas', () => {
    const result = validateManifests(manifests);
    reportSkipped(result);
    expect(result.errors).toEqual([]);
    if (fs.existsSync(CRD_DIR)) {
      expect(result.skipped).toEqual([]);
    }
    expect(manifests.filter(m => m.kind === 'LeaderWorkerSet')).toHaveLength(2);
  });

  test('the router config lists every rank of both pools and validates against the engine schema', () => {
    const config = routerConfigOf(manifests);
    expect(routerConfigValidator()(config)).toBe(true);
    for (const role of ['prefill', 'decode'] as const) {
      const pool = config.pools.find((p: any) => p.name === role);
      const ep = pools[role];
      const ranks = Array.from({ length: ep.dataParallelLocal }, (_, j) => 8000 + j);
      // DNS discovery of the pool's headless Service (every pod of every group) x one port per local rank
      expect(pool.discovery).toEqual({ type: 'dns', host: `deepseek-v3-${role}.inference.svc.cluster.local`, ports: ranks });
      expect(pool.kvEvents).toEqual({ port: 5557, replayPort: 15557, topicPrefix: 'kv@' });
      const service = manifests.find(m => m.kind === 'Service' && m.metadata.name === `deepseek-v3-${role}`);
      expect(service.spec.clusterIP).toBe('None');
      expect(service.spec.selector).not.toHaveProperty(['leaderworkerset.sigs.k8s.io/worker-index']);
      expect(service.spec.ports.map((p: any) => p.port)).toEqual(ranks);
    }
  });

  test.each(['prefill', 'decode'] as const)('every pod of the %s pool serves every rank where the router looks: HTTP 8000+j, KV events 5557+j', role => {
    // GIVEN the router's view of the pool
    const pool = routerConfigOf(manifests).pools.find((p: any) => p.name === role);
    const ep = pools[role];
    const lws = lwsOf(manifests, `-${role}`);
    const local = ep.dataParallelLocal;
    const seen = new Set<number>();
    for (let index = 0; index < ep.nodesPerGroup; index++) {
      // WHEN each pod's real start script runs (leader at index 0, workers after)
      const template = index === 0 ? lws.spec.leaderWorkerTemplate.leaderTemplate : lws.spec.leaderWorkerTemplate.workerTemplate;
      const podIp = `10.0.0.${index + 1}`;
      const launches = runPodScript(template, index, podIp, local);
      // THEN it starts one API server per local rank, each on its own GPU
      expect(launches).toHaveLength(local);
      expect(new Set(launches.map(l => l.gpus)).size).toBe(local);
      for (const { args } of launches) {
        const rank = Number(flag(args, '--data-parallel-rank'));
        const port = Number(flag(args, '--port'));
        const j = pool.discovery.ports.indexOf(port);
        // its HTTP port is one the router lists, and its global rank is this pod's start + j
        expect(j).toBeGreaterThanOrEqual(0);
        expect(rank).toBe(index * local + j);
        seen.add(rank);
        // vLLM offsets the KV-events port by the global rank: it lands on the router's port for ports[j]
        const events = JSON.parse(flag(args, '--kv-events-config')!);
        expect(boundKvEventsPort(events, rank)).toBe(pool.kvEvents.port + j);
        // and so is the replay port, which a restarting router asks
        expect(boundKvEventsPort({ endpoint: events.replay_endpoint }, rank)).toBe(pool.kvEvents.replayPort + j);
        expect(events.topic).toBe(`kv@${podIp}:${port}@deepseek-ai/DeepSeek-V3`);
        expect(flag(args, '--data-parallel-size')).toBe(String(ep.dataParallel));
      }
      // AND the pod declares every rank's HTTP and KV-events port, and is ready only when every rank is
      const c = template.spec.containers[0];
      expect(c.ports.map((p: any) => p.containerPort).sort()).toEqual([
        ...Array.from({ length: local }, (_, j) => 5557 + j), ...Array.from({ length: local }, (_, j) => 8000 + j),
        ...Array.from({ length: local }, (_, j) => 15557 + j),
      ].sort());
      const readiness = c.readinessProbe.exec.command.join(' ');
      expect(readiness).toContain(`for PORT in ${pool.discovery.ports.join(' ')}; do`);
    }
    // AND the group's ranks are exactly 0 .. dataParallel-1
    expect([...seen].sort((a, b) => a - b)).toEqual(Array.from({ length: ep.dataParallel }, (_, r) => r));
  });

  test('NIXL over LIBFABRIC between the pools; the decode pool carries the KV load failure policy', () => {
    for (const template of ['leaderTemplate', 'workerTemplate'] as const) {
      const decode = JSON.parse(flag(container(lwsOf(manifests, '-decode'), template).args, '--kv-transfer-config')!);
      expect(decode).toEqual({
        kv_connector: 'NixlConnector',
        kv_role: 'kv_consumer',
        kv_connector_extra_config: { backends: ['LIBFABRIC'], kv_lease_duration: 300 },
        kv_load_failure_policy: 'fail',
      });
      const prefill = JSON.parse(flag(container(lwsOf(manifests, '-prefill'), 'leaderTemplate').args, '--kv-transfer-config')!);
      expect(prefill.kv_connector_extra_config).toEqual({ backends: ['LIBFABRIC'], kv_lease_duration: 300 });
      expect(prefill).not.toHaveProperty('kv_load_failure_policy');
    }
    expect(inference.nixlBackend).toBe('LIBFABRIC');
  });

  test('the KV block size is 64 (the MLA backend on H200 and B200) on every pod of both pools and in the router', () => {
    const lwss = manifests.filter(m => m.kind === 'LeaderWorkerSet');
    const sizes = lwss.flatMap(l => (['leaderTemplate', 'workerTemplate'] as const).map(t => flag(container(l, t).args, '--block-size')));
    expect(sizes).toEqual(['64', '64', '64', '64']);
    expect(routerConfigOf(manifests).router.kvBlockSize).toBe(64);
  });

  test('the router routes precisely: KV-aware, with the tokenizer', () => {
    const config = routerConfigOf(manifests);
    expect(config.policy.name).toBe('kv-aware');
    expect(config.policy.prefixSource).toBe('auto');
    expect(config.router.tokenizer).toBe('/var/lib/disagg/tokenizer');
  });
});

test('the p5en example matches the reviewed snapshot', () => {
  expect(example(AcceleratedInstanceType.P5EN_48XLARGE).manifests).toMatchSnapshot();
});

test('the example picks its instance type from WIDE_EP_PD_INSTANCE_TYPE and refuses others', () => {
  expect(instanceTypeFromEnv(undefined)).toBe(AcceleratedInstanceType.P5EN_48XLARGE);
  expect(instanceTypeFromEnv('p6-b200.48xlarge')).toBe(AcceleratedInstanceType.P6_B200_48XLARGE);
  expect(() => instanceTypeFromEnv('p4d.24xlarge')).toThrow(/WIDE_EP_PD_INSTANCE_TYPE \(p4d\.24xlarge\) must be one of p5en\.48xlarge, p6-b200\.48xlarge/);
});

test('an InferencePool in front of a per-rank EP decode side selects every pod of the group and every rank port', () => {
  // GIVEN a per-rank EP decode side of two nodes behind an InferencePool WHEN synthesized
  const { manifests } = synthChart(c => new DisaggregatedInference(c, 'Ds', deepseekEpPdProps({ endpoints: DataParallelEndpoints.PER_RANK },
    { gateway: GatewayExposure.inferencePool({ gateway: { name: 'gw' }, endpointPickerService: 'epp' }) })));
  const pool = manifests.find(m => m.kind === 'InferencePool');
  // THEN the workers' ranks 8-15 are selected too (not the leaders alone), on ports 8000-8007
  expect(pool.spec.selector.matchLabels).not.toHaveProperty(['leaderworkerset.sigs.k8s.io/worker-index']);
  expect(pool.spec.selector.matchLabels).toMatchObject({ 'app.kubernetes.io/component': 'decode' });
  expect(pool.spec.targetPorts).toEqual(Array.from({ length: 8 }, (_, j) => ({ number: 8000 + j })));
  // AND with a single endpoint per group, only the leaders serve
  const single = synthChart(c => new DisaggregatedInference(c, 'Ds', deepseekEpPdProps({ endpoints: DataParallelEndpoints.SINGLE },
    { gateway: GatewayExposure.inferencePool({ gateway: { name: 'gw' } }) }))).manifests.find(m => m.kind === 'InferencePool');
  expect(single.spec.selector.matchLabels).toMatchObject({ 'leaderworkerset.sigs.k8s.io/worker-index': '0' });
  expect(single.spec.targetPorts).toEqual([{ number: 8000 }]);
});
