import { execFile, spawnSync } from 'child_process';
import * as fs from 'fs';
import * as http from 'http';
import * as net from 'net';
import * as os from 'os';
import * as path from 'path';
import { container, find, flag, synthChart, wideEpProps, env, defaultProps, deepseekEpPdProps, routerConfigValidator } from './util';
import { AcceleratedInstanceType, AllToAllBackend, DataParallelEndpoints, DisaggregatedInference, ExpertParallelPool, ModelArchitecture, PoolRole, Precision } from '../../src';

describe('ExpertParallelPool', () => {
  test('DeepSeek-V3 EP16 on two p5en: vLLM data-parallel flags wired to the LWS environment', () => {
    // GIVEN two nodes per group WHEN synthesized
    const { manifests, result: pool } = synthChart(c => new ExpertParallelPool(c, 'Ds', wideEpProps()));
    const lws = find(manifests, 'LeaderWorkerSet');
    const leader = container(lws, 'leaderTemplate');
    // THEN a group of 2 whole-node pods, DP 16 = EP 16, TP 1
    expect(lws.spec.leaderWorkerTemplate.size).toBe(2);
    expect(lws.spec.leaderWorkerTemplate.restartPolicy).toBe('RecreateGroupOnPodRestart');
    expect(pool.expertParallelSize).toBe(16);
    expect(leader.args[0]).toBe('deepseek-ai/DeepSeek-V3');
    expect(leader.args).toContain('--enable-expert-parallel');
    expect(flag(leader.args, '--data-parallel-size')).toBe('16');
    expect(flag(leader.args, '--data-parallel-address')).toBe('$(LWS_LEADER_ADDRESS)');
    expect(flag(leader.args, '--data-parallel-rpc-port')).toBe('5555');
    expect(flag(leader.args, '--tensor-parallel-size')).toBe('1');
    // NCCL-based all-to-all on EFA; no KV transfer for a serving pool
    expect(flag(leader.args, '--all2all-backend')).toBe('allgather_reducescatter');
    expect(leader.args).not.toContain('--kv-transfer-config');
    expect(leader.resources.limits['nvidia.com/gpu']).toBe(8);
    expect(leader.resources.limits['vpc.amazonaws.com/efa']).toBe(16);
  });

  test('per-rank endpoints: one vllm serve per GPU, ranks from LWS_WORKER_INDEX, every port in the Service', () => {
    // GIVEN the default endpoints WHEN synthesized
    const { manifests } = synthChart(c => new ExpertParallelPool(c, 'Ds', wideEpProps()));
    const lws = find(manifests, 'LeaderWorkerSet');
    const worker = container(lws, 'workerTemplate');
    const script: string = worker.command[2];
    // THEN the script starts 8 ranks per pod, each on its GPU and port, from LWS_WORKER_INDEX x 8
    expect(worker.command.slice(0, 2)).toEqual(['/bin/bash', '-c']);
    expect(script).toContain('START=$((LWS_WORKER_INDEX * 8))');
    expect(script).toContain('for LOCAL in $(seq 0 7)');
    expect(script).toContain('--data-parallel-rank "$RANK" --port "$PORT"');
    expect(script).toContain('CUDA_VISIBLE_DEVICES="$GPUS" vllm serve "$@"');
    expect(worker.args).not.toContain('--headless');
    // every rank's HTTP port, its KV-events port (5557 + local rank, where the router subscribes) and its replay port (15557 + local rank)
    expect(worker.ports.map((p: any) => p.containerPort)).toEqual([
      8000, 8001, 8002, 8003, 8004, 8005, 8006, 8007, 5557, 5558, 5559, 5560, 5561, 5562, 5563, 5564,
      15557, 15558, 15559, 15560, 15561, 15562, 15563, 15564,
    ]);
    expect(worker.ports.map((p: any) => p.name)).toContain('kv-events-7');
    // ready only when every rank answers /health; startup and liveness on rank 0
    expect(worker.readinessProbe.exec.command.slice(0, 2)).toEqual(['/bin/bash', '-c']);
    expect(worker.readinessProbe.exec.command[2]).toContain('for PORT in 8000 8001 8002 8003 8004 8005 8006 8007; do');
    expect(worker.startupProbe.httpGet.port).toBe('http-0');
    expect(worker.livenessProbe.httpGet.port).toBe('http-0');
    const svc = find(manifests, 'Service');
    expect(svc.spec.clusterIP).toBe('None');
    expect(svc.spec.ports.map((p: any) => p.port)).toEqual([8000, 8001, 8002, 8003, 8004, 8005, 8006, 8007]);
    // every pod serves: no leader-only selector
    expect(svc.spec.selector['leaderworkerset.sigs.k8s.io/worker-index']).toBeUndefined();
  });

  test('the per-rank readiness probe passes only when every rank answers /health with 200 (run against real servers)', async () => {
    // GIVEN the probe of a per-rank pod, pointed at three loopback servers instead of ports 8000-8007
    const { manifests } = synthChart(c => new ExpertParallelPool(c, 'Ds', wideEpProps()));
    const probe: string = container(find(manifests, 'LeaderWorkerSet'), 'workerTemplate').readinessProbe.exec.command[2];
    const status = [200, 200, 200];
    const servers = await Promise.all(status.map((_, i) => new Promise<http.Server>(resolve => {
      const server = http.createServer((req, res) => {
        res.writeHead(req.url === '/health' ? status[i] : 404);
        res.end();
      });
      server.listen(0, '127.0.0.1', () => resolve(server));
    })));
    const ports = servers.map(s => (s.address() as net.AddressInfo).port);
    const script = probe.replace('for PORT in 8000 8001 8002 8003 8004 8005 8006 8007; do', `for PORT in ${ports.join(' ')}; do`);
    expect(script).not.toBe(probe);
    const run = () => new Promise<{ code: number; out: string }>(resolve => {
      execFile('/bin/bash', ['-c', script], { timeout: 10_000 }, (err, stdout) => resolve({ code: err ? Number((err as any).code ?? 1) : 0, out: stdout }));
    });
    try {
      // WHEN every rank is healthy THEN the pod is ready
      expect((await run()).code).toBe(0);
      // WHEN one rank still loads (503) THEN it is not, naming the port
      status[1] = 503;
      const loading = await run();
      expect(loading.code).not.toBe(0);
      expect(loading.out).toContain(`rank on port ${ports[1]} not ready: 503`);
      // WHEN one rank is gone THEN it is not
      status[1] = 200;
      await new Promise(resolve => servers[2].close(resolve));
      expect((await run()).code).not.toBe(0);
    } finally {
      servers.forEach(s => s.close());
    }
  });

  test('an InferencePool lists one target port per local rank', () => {
    // GIVEN an InferencePool exposure WHEN synthesized
    const { manifests } = synthChart(c => new ExpertParallelPool(c, 'Ds', wideEpProps({ inferencePool: { gateway: { name: 'gw' }, endpointPickerService: 'epp' } })));
    const pool = find(manifests, 'InferencePool');
    // THEN
    expect(pool.spec.targetPorts).toEqual([8000, 8001, 8002, 8003, 8004, 8005, 8006, 8007].map(number => ({ number })));
    expect(find(manifests, 'HTTPRoute').spec.rules[0].backendRefs[0]).toMatchObject({ kind: 'InferencePool', name: 'deepseek-v3' });
  });

  test('single endpoint: the leader serves on 8000, workers run --headless from their start rank', () => {
    // GIVEN SINGLE endpoints WHEN synthesized
    const { manifests } = synthChart(c => new ExpertParallelPool(c, 'Ds', wideEpProps({ endpoints: DataParallelEndpoints.SINGLE })));
    const lws = find(manifests, 'LeaderWorkerSet');
    const leader = container(lws, 'leaderTemplate');
    const worker = container(lws, 'workerTemplate');
    // THEN
    expect(flag(leader.args, '--data-parallel-size-local')).toBe('8');
    expect(flag(leader.args, '--port')).toBe('8000');
    expect(leader.command[2]).toContain('exec vllm serve "$@" --data-parallel-start-rank "$START"');
    expect(worker.command[2]).toContain('exec vllm serve "$@" --headless --data-parallel-start-rank "$START"');
    expect(worker.startupProbe).toBeUndefined();
    expect(worker.ports).toEqual([]);
    expect(find(manifests, 'Service').spec.selector['leaderworkerset.sigs.k8s.io/worker-index']).toBe('0');
  });

  test('expert load balancing with redundant experts: --enable-eplb and --eplb-config', () => {
    // GIVEN 32 redundant experts (256 + 32 = 288 = 18 x 16) WHEN synthesized
    const { manifests } = synthChart(c => new ExpertParallelPool(c, 'Ds', wideEpProps({ redundantExperts: 32 })));
    const args: string[] = container(find(manifests, 'LeaderWorkerSet'), 'leaderTemplate').args;
    // THEN
    expect(args).toContain('--enable-eplb');
    expect(JSON.parse(flag(args, '--eplb-config')!)).toEqual({ num_redundant_experts: 32 });
  });

  test('env: EFA, a NIXL side channel base clear of the per-rank KV-event ports, bootstrap on eth0', () => {
    // GIVEN WHEN
    const { manifests } = synthChart(c => new ExpertParallelPool(c, 'Ds', wideEpProps()));
    const c = container(find(manifests, 'LeaderWorkerSet'), 'workerTemplate');
    // THEN
    expect(env(c, 'FI_PROVIDER').value).toBe('efa');
    expect(env(c, 'VLLM_NIXL_SIDE_CHANNEL_PORT').value).toBe('20000');
    expect(env(c, 'GLOO_SOCKET_IFNAME').value).toBe('eth0');
    expect(env(c, 'PYTHONHASHSEED').value).toBe('0');
  });

  test('a DeepEP backend on EFA is allowed with a warning', () => {
    // GIVEN DeepEP low latency across two EFA nodes WHEN built
    const { result: pool, manifests } = synthChart(c => new ExpertParallelPool(c, 'Ds', wideEpProps({ allToAllBackend: AllToAllBackend.DEEPEP_LOW_LATENCY })));
    // THEN
    expect(flag(container(find(manifests, 'LeaderWorkerSet'), 'leaderTemplate').args, '--all2all-backend')).toBe('deepep_low_latency');
    expect(pool.warnings.some(w => w.startsWith('disagg:deepEpOnEfa'))).toBe(true);
  });

  test('nodesPerGroup defaults to the fewest nodes that fit (Qwen3-235B-A22B BF16 fits one p5en)', () => {
    // GIVEN no nodesPerGroup WHEN built
    const { result: pool } = synthChart(c => new ExpertParallelPool(c, 'Q', {
      model: ModelArchitecture.QWEN3_235B_A22B, image: 'img', instanceType: AcceleratedInstanceType.P5EN_48XLARGE, maxContext: 32768,
    }));
    // THEN
    expect(pool.nodesPerGroup).toBe(1);
    expect(pool.dataParallel).toBe(8);
  });

  test('a prefill role carries the NIXL KV transfer config', () => {
    // GIVEN WHEN
    const { manifests } = synthChart(c => new ExpertParallelPool(c, 'Ds', wideEpProps({ role: PoolRole.PREFILL })));
    const c = container(find(manifests, 'LeaderWorkerSet'), 'leaderTemplate');
    // THEN
    expect(JSON.parse(flag(c.args, '--kv-transfer-config')!)).toEqual({
      kv_connector: 'NixlConnector', kv_role: 'kv_producer', kv_connector_extra_config: { backends: ['LIBFABRIC'], kv_lease_duration: 300 },
    });
    expect(env(c, 'VLLM_HTTP_TIMEOUT_KEEP_ALIVE').value).toBe('120');
  });

  test('DisaggregatedInference with an expert-parallel decode side asked for a single endpoint: the router discovers it', () => {
    // GIVEN DeepSeek-V3 with a TP8 prefill pool and an EP16 decode pool with one API server per group WHEN synthesized
    const { manifests, result: inference } = synthChart(c => new DisaggregatedInference(c, 'Ds',
      deepseekEpPdProps({ endpoints: DataParallelEndpoints.SINGLE })));
    const lws = find(manifests, 'LeaderWorkerSet', '-decode');
    const leader = container(lws, 'leaderTemplate');
    // THEN the decode side is an LWS named after the deployment, in SINGLE mode, with NIXL
    expect(lws.metadata.name).toBe('deepseek-v3-decode');
    expect(flag(leader.args, '--data-parallel-size')).toBe('16');
    expect(flag(leader.args, '--data-parallel-size-local')).toBe('8');
    expect(JSON.parse(flag(leader.args, '--kv-transfer-config')!).kv_connector).toBe('NixlConnector');
    expect(lws.spec.leaderWorkerTemplate.leaderTemplate.spec.serviceAccountName).toBe('deepseek-v3');
    const config = JSON.parse(inference.routerConfig);
    expect(config.pools[1]).toMatchObject({ role: 'decode', discovery: { host: 'deepseek-v3-decode.inference.svc.cluster.local', port: 8000 } });
    expect(inference.decodeIsMultiNode).toBe(true);
  });

  // vLLM's ZmqEventPublisher binds the configured KV-events port plus the engine's global
  // data-parallel rank (vllm/distributed/kv_events.py, offset_endpoint_port).
  const vllmKvEventsPort = (endpoint: string, rank: number) => Number(endpoint.slice(endpoint.lastIndexOf(':') + 1)) + rank;

  /** Runs a pod's start script with a stand-in `vllm` that records its arguments; one entry per `vllm serve`. */
  function runScript(c: any, workerIndex: number, servers: number): string[][] {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'per-rank-'));
    try {
      fs.writeFileSync(path.join(dir, 'vllm'), '#!/bin/bash\nprintf \'%s\\0\' "$@" > "$OUTDIR/call.$BASHPID.tmp" && mv "$OUTDIR/call.$BASHPID.tmp" "$OUTDIR/call.$BASHPID"\n', { mode: 0o755 });
      spawnSync('/bin/bash', ['-c', c.command[2], 'vllm', ...c.args], {
        env: { PATH: `${dir}:${process.env.PATH}`, OUTDIR: dir, LWS_WORKER_INDEX: String(workerIndex), POD_IP: '10.0.0.9' },
        timeout: 10_000,
      });
      // `wait -n` returns after the first server exits: wait for the others' records.
      const calls = () => fs.readdirSync(dir).filter(f => /^call\.\d+$/.test(f));
      for (let i = 0; i < 200 && calls().length < servers; i++) spawnSync('sleep', ['0.02']);
      return calls().map(f => fs.readFileSync(path.join(dir, f), 'utf8').split('\0').slice(0, -1));
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }

  test('DisaggregatedInference with a per-rank decode side (the default): the router lists every rank port and finds each rank\'s KV events', () => {
    // GIVEN an EP16 decode pool on two p5en, endpoints left to their default (one API server per rank) WHEN synthesized
    const { manifests, result: inference } = synthChart(c => new DisaggregatedInference(c, 'Ds', deepseekEpPdProps()));
    const config = JSON.parse(inference.routerConfig);
    const lws = find(manifests, 'LeaderWorkerSet', '-decode');
    // THEN the router's decode pool lists ports 8000..8007 (8 local ranks) and the prefill pool keeps one port
    const local = 8;
    const ports = Array.from({ length: local }, (_, r) => 8000 + r);
    expect(config.pools[1].discovery).toEqual({ type: 'dns', host: 'deepseek-v3-decode.inference.svc.cluster.local', ports });
    expect(config.pools[0].discovery.port).toBe(8000);
    expect(config.pools[0].discovery.ports).toBeUndefined();
    // AND the Service exposes the same ports
    const svc = find(manifests, 'Service', '-decode');
    expect(svc.spec.ports.map((p: any) => p.port)).toEqual(expect.arrayContaining(ports));
    // AND on the second pod of the group (ranks 8..15) every rank publishes where the router subscribes:
    // vLLM's port for its rank equals kvEvents.port + the index of the rank's HTTP port
    for (const [template, workerIndex] of [['leaderTemplate', 0], ['workerTemplate', 1]] as const) {
      const calls = runScript(container(lws, template), workerIndex, local);
      expect(calls).toHaveLength(local);
      const seen = calls.map(args => {
        const port = Number(flag(args, '--port'));
        const rank = Number(flag(args, '--data-parallel-rank'));
        const events = JSON.parse(flag(args, '--kv-events-config')!);
        expect(rank).toBe(workerIndex * local + (port - 8000));
        expect(events.topic).toBe(`kv@10.0.0.9:${port}@deepseek-ai/DeepSeek-V3`);
        const routerKvPort = config.pools[1].kvEvents.port + config.pools[1].discovery.ports.indexOf(port);
        expect(vllmKvEventsPort(events.endpoint, rank)).toBe(routerKvPort);
        // and its replay socket where the router asks for it
        const routerReplayPort = config.pools[1].kvEvents.replayPort + config.pools[1].discovery.ports.indexOf(port);
        expect(vllmKvEventsPort(events.replay_endpoint, rank)).toBe(routerReplayPort);
        return port;
      });
      expect(seen.sort()).toEqual(ports);
    }
  });

  test('a per-rank router config validates against engine/schema/engine-config.schema.json; both port and ports does not', () => {
    // GIVEN the engine's schema (its router sections) and a per-rank prefill side
    const validate = routerConfigValidator();
    const { result: inference } = synthChart(c => new DisaggregatedInference(c, 'Ds', defaultProps({
      model: ModelArchitecture.DEEPSEEK_V3,
      modelSource: undefined,
      weightPrecision: Precision.FP8,
      prefill: undefined,
      prefillExpertParallel: {
        instanceType: AcceleratedInstanceType.P5EN_48XLARGE, nodesPerGroup: 1, tensorParallel: 2, endpoints: DataParallelEndpoints.PER_RANK,
      },
      decode: { instanceType: AcceleratedInstanceType.P5EN_48XLARGE, tensorParallel: 8 },
    })));
    const config = JSON.parse(inference.routerConfig);
    // WHEN validated THEN it passes, with the 4 local ranks' ports
    expect(config.pools[0].discovery.ports).toEqual([8000, 8001, 8002, 8003]);
    validate(config);
    expect(validate.errors ?? []).toEqual([]);
    // AND the schema refuses a pool with both port and ports
    config.pools[0].discovery.port = 8000;
    expect(validate(config)).toBe(false);
  });
});
