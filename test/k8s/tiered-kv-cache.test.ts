import { Size } from 'cdk8s';
import { container, defaultProps, env, find, flag, synthChart, tieredPdChart, wideEpProps } from './util';
import { DisaggregatedInference, ExpertParallelPool, KvCacheBackend, KvStoreEndpoint, KvTier, TieredKvCache } from '../../src';

const tieredPd = tieredPdChart;

describe('TieredKvCache', () => {
  test('LMCache behind NIXL: a MultiConnector, NIXL first', () => {
    // GIVEN host + NVMe + kvstore tiers on the decode pool WHEN synthesized
    const { manifests } = tieredPd();
    const decode = container(find(manifests, 'Deployment', '-decode'));
    // THEN
    expect(JSON.parse(flag(decode.args, '--kv-transfer-config')!)).toEqual({
      kv_connector: 'MultiConnector',
      kv_role: 'kv_both',
      kv_connector_extra_config: {
        connectors: [
          { kv_connector: 'NixlConnector', kv_role: 'kv_consumer', kv_connector_extra_config: { backends: ['LIBFABRIC'], kv_lease_duration: 300 } },
          { kv_connector: 'LMCacheConnectorV1', kv_role: 'kv_both' },
        ],
      },
      // vLLM reads the KV load failure policy at the top level
      kv_load_failure_policy: 'fail',
    });
    // the prefill pool is untouched
    expect(JSON.parse(flag(container(find(manifests, 'Deployment', '-prefill')).args, '--kv-transfer-config')!).kv_connector).toBe('NixlConnector');
  });

  test('LMCache env: sizes per rank (TP4), the local disk and the kvstore URL', () => {
    // GIVEN WHEN
    const { manifests, result } = tieredPd();
    const decode = container(find(manifests, 'Deployment', '-decode'));
    // THEN 500 GiB / 4 ranks, 2000 GiB / 4 ranks
    expect(result.cache.backend).toBe(KvCacheBackend.LMCACHE);
    expect(env(decode, 'LMCACHE_CHUNK_SIZE').value).toBe('256');
    expect(env(decode, 'LMCACHE_LOCAL_CPU').value).toBe('True');
    expect(env(decode, 'LMCACHE_MAX_LOCAL_CPU_SIZE').value).toBe('125');
    expect(env(decode, 'LMCACHE_LOCAL_DISK').value).toBe('file:///var/cache/disagg/lmcache/');
    expect(env(decode, 'LMCACHE_MAX_LOCAL_DISK_SIZE').value).toBe('500');
    expect(env(decode, 'LMCACHE_REMOTE_URL').value).toBe('redis://kvstore.inference.svc.cluster.local:6379');
    expect(env(decode, 'PYTHONHASHSEED').value).toBe('0');
    // the disk tier is an emptyDir of its size
    const spec = find(manifests, 'Deployment', '-decode').spec.template.spec;
    expect(spec.volumes).toContainEqual({ name: 'kv-disk', emptyDir: { sizeLimit: '2000Gi' } });
    expect(decode.volumeMounts).toContainEqual({ name: 'kv-disk', mountPath: '/var/cache/disagg/lmcache' });
  });

  test('the kvstore StatefulSet runs disagg-engine kvstore on the pool\'s nodes, with its headless Service', () => {
    // GIVEN WHEN
    const { manifests } = tieredPd();
    const sts = find(manifests, 'StatefulSet');
    const c = sts.spec.template.spec.containers[0];
    // THEN the flags the binary takes (see `disagg-engine kvstore --help`)
    expect([...c.command, ...c.args]).toEqual([
      'disagg-engine', 'kvstore', '--bind', '$(POD_IP)', '--port', '6379', '--memory-bytes', '64g',
      '--disk-dir', '/mnt/k8s-disks/0/kvstore', '--disk-bytes', '4096g', '--metrics-port', '9121',
    ]);
    expect(c.image).toBe('registry.example.com/disagg/engine-slim:0.1.0');
    expect(c.resources.requests.memory).toBe(`${Math.ceil(64 * 1.1 + 2)}Gi`);
    expect(sts.spec.template.spec.nodeSelector).toEqual({ 'node.kubernetes.io/instance-type': 'p5en.48xlarge' });
    expect(sts.spec.template.spec.securityContext.runAsNonRoot).toBe(true);
    const svc = find(manifests, 'Service', 'kvstore');
    expect(svc.spec.clusterIP).toBe('None');
    expect(svc.spec.ports.map((p: any) => p.port)).toEqual([6379, 9121]);
  });

  test('the pod memory request grows with the host tier', () => {
    // GIVEN a 900 GiB host tier on a TP4 pod (half of 2048 GiB)
    const { manifests } = tieredPd(900);
    const r = container(find(manifests, 'Deployment', '-decode')).resources;
    // THEN 900 + working set (16 + 4 x 4) + /dev/shm 32 = 964 GiB, above the 921 GiB default request
    expect(r.requests.memory).toBe('964Gi');
    expect(r.limits.memory).toBe('964Gi');
    // and the prefill pool keeps its default
    expect(container(find(manifests, 'Deployment', '-prefill')).resources.requests.memory).toBe('921Gi');
  });

  test('native offloading on a plain serving pool: --kv-offloading-* per server process', () => {
    // GIVEN a host tier alone on a per-rank expert-parallel pool (8 servers per pod) WHEN synthesized
    const { manifests, result } = synthChart(c => {
      const pool = new ExpertParallelPool(c, 'Ds', wideEpProps());
      return new TieredKvCache(c, 'Cache', { tiers: [KvTier.hostMemory(Size.gibibytes(800))] }).attachTo(pool);
    });
    const args: string[] = container(find(manifests, 'LeaderWorkerSet'), 'leaderTemplate').args;
    // THEN native is the default backend, 800 GiB / 8 processes each
    expect(result.backend).toBe(KvCacheBackend.NATIVE);
    expect(flag(args, '--kv-offloading-backend')).toBe('native');
    expect(flag(args, '--kv-offloading-size')).toBe('100');
    expect(args).not.toContain('--kv-transfer-config');
  });

  test('native offloading behind NIXL: an OffloadingConnector with cpu_bytes_to_use', () => {
    // GIVEN a host tier on the prefill pool WHEN synthesized
    const { manifests } = synthChart(c => {
      const inference = new DisaggregatedInference(c, 'Llama', defaultProps());
      new TieredKvCache(c, 'Cache', { tiers: [KvTier.hostMemory(Size.gibibytes(512))] }).attachTo(inference.prefill);
    });
    const config = JSON.parse(flag(container(find(manifests, 'Deployment', '-prefill')).args, '--kv-transfer-config')!);
    // THEN
    expect(config.kv_connector).toBe('MultiConnector');
    expect(config.kv_connector_extra_config.connectors[1]).toEqual({
      kv_connector: 'OffloadingConnector', kv_role: 'kv_both', kv_connector_extra_config: { cpu_bytes_to_use: 512 * 2 ** 30 },
    });
  });

  test('an existing Redis or Valkey endpoint: only LMCACHE_REMOTE_URL, no StatefulSet', () => {
    // GIVEN WHEN
    const { manifests } = synthChart(c => {
      const inference = new DisaggregatedInference(c, 'Llama', defaultProps());
      new TieredKvCache(c, 'Cache', { tiers: [KvTier.hostMemory(Size.gibibytes(500)), KvTier.remote(KvStoreEndpoint.redis('redis://valkey.cache.svc:6379'))] })
        .attachTo(inference.decode);
    });
    // THEN
    expect(env(container(find(manifests, 'Deployment', '-decode')), 'LMCACHE_REMOTE_URL').value).toBe('redis://valkey.cache.svc:6379');
    expect(manifests.some(m => m.kind === 'StatefulSet')).toBe(false);
  });
});

describe('pools are built at synthesis', () => {
  test('addEnv and addArgs after construction land in the manifest', () => {
    // GIVEN a deployment and an expert-parallel pool, changed after construction WHEN synthesized
    const { manifests } = synthChart(c => {
      const inference = new DisaggregatedInference(c, 'Llama', defaultProps());
      inference.decode.addEnv('VLLM_LOGGING_LEVEL', 'DEBUG');
      inference.decode.addArgs('--max-num-seqs', '128');
      const pool = new ExpertParallelPool(c, 'Ds', wideEpProps());
      pool.addEnv('VLLM_MOE_DP_CHUNK_SIZE', '384');
      pool.addEnv('PYTHONHASHSEED', '42');
    });
    const decode = container(find(manifests, 'Deployment', '-decode'));
    const ep = container(find(manifests, 'LeaderWorkerSet', 'deepseek-v3'), 'workerTemplate');
    // THEN
    expect(env(decode, 'VLLM_LOGGING_LEVEL').value).toBe('DEBUG');
    expect(decode.args.slice(-2)).toEqual(['--max-num-seqs', '128']);
    expect(env(ep, 'VLLM_MOE_DP_CHUNK_SIZE').value).toBe('384');
    // an added variable replaces a generated one of the same name
    expect(ep.env.filter((e: any) => e.name === 'PYTHONHASHSEED')).toEqual([{ name: 'PYTHONHASHSEED', value: '42' }]);
    expect(env(container(find(manifests, 'Deployment', '-prefill')), 'VLLM_LOGGING_LEVEL')).toBeUndefined();
  });
});
