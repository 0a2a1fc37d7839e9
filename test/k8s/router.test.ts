import * as fs from 'fs';
import * as path from 'path';
import { container, deepseekEpPdProps, defaultProps, find, flag, routerConfigValidator, synthChart, synthInference } from './util';
import {
  AcceleratedInstanceType, DataParallelEndpoints, DisaggregatedInference, KvCacheFootprint, ModelArchitecture, Precision, RouterPolicy, ServingPlan,
} from '../../src';

// The router's JSON reader (its flags live in router_config.cc).
const ROUTER_CONFIG_CC = path.resolve(__dirname, '..', '..', 'engine', 'src', 'servers', 'router', 'router_config_json.cc');
// The policy section's reader, shared with the simulator.
const POLICY_CONFIG_CC = path.resolve(__dirname, '..', '..', 'engine', 'src', 'core', 'routing_policy_config.cc');

describe('router', () => {
  test('Deployment runs `disagg-engine router` with the ConfigMap mounted, non-root, read-only root', () => {
    // GIVEN WHEN
    const { manifests } = synthInference(defaultProps());
    const router = find(manifests, 'Deployment', '-router');
    const c = router.spec.template.spec.containers[0];
    // THEN
    expect([...c.command, ...c.args]).toEqual(['disagg-engine', 'router', '--config', '/etc/disagg/config.json']);
    expect(c.volumeMounts).toContainEqual({ name: 'config', mountPath: '/etc/disagg', readOnly: true });
    expect(router.spec.template.spec.volumes[0].configMap.name).toBe('llama-3-3-70b-router-config');
    expect(c.securityContext).toMatchObject({ runAsNonRoot: true, readOnlyRootFilesystem: true, allowPrivilegeEscalation: false });
    expect(router.spec.template.metadata.annotations['disagg.dev/config-sha256']).toMatch(/^[0-9a-f]{64}$/);
    expect(find(manifests, 'Service', '-router').spec.ports[0]).toMatchObject({ port: 80, targetPort: 'http' });
  });

  test('config: pools by headless-Service DNS, KV events and policy; the resolved numbers stay typed on the construct', () => {
    // GIVEN a custom policy WHEN synthesized
    const props = defaultProps({ routerPolicy: RouterPolicy.kvAware({ prefixWeight: 5 }), disaggregationThresholdTokens: 1024 });
    const { manifests, inference } = synthInference(props);
    const config = JSON.parse(find(manifests, 'ConfigMap').data['config.json']);
    const plan = ServingPlan.create({
      model: ModelArchitecture.LLAMA_3_3_70B,
      instanceType: AcceleratedInstanceType.P5EN_48XLARGE,
      maxContext: 32768,
      weightPrecision: Precision.FP8,
      kvCachePrecision: Precision.FP8,
      tensorParallel: 4,
    });
    // THEN the ConfigMap holds the construct's configuration: the router's sections and nothing else
    expect(config).toEqual(JSON.parse(inference.routerConfig));
    expect(config).toEqual(inference._router.config);
    expect(Object.keys(config)).toEqual(['router', 'policy', 'pools']);
    expect(config.router).toEqual({
      listenPort: 8000,
      servedModelName: 'meta-llama/Llama-3.3-70B-Instruct',
      kvBlockSize: 16,
      tokenizer: '/var/lib/disagg/tokenizer',
      // what /tokenize answers: the workers' --max-model-len
      maxModelLen: 32768,
      // two routers: each serves its index to the other, which loads it when it restarts
      peerPort: 8100,
      peers: { host: 'llama-3-3-70b-router-peers.inference.svc.cluster.local', port: 8100 },
      // the pools' transport and a token's KV (80 layers x 8 KV heads x 128 x K and V at FP8), for the
      // router's KV transfer metrics per prefill/decode pair
      kvTransfer: { backend: 'LIBFABRIC', bytesPerToken: 80 * 8 * 128 * 2 },
    });
    expect(config.pools).toEqual(['prefill', 'decode'].map(role => ({
      name: role,
      role,
      discovery: { type: 'dns', host: `llama-3-3-70b-${role}.inference.svc.cluster.local`, port: 8000 },
      // and the workers' replay sockets, from which a restarting router rebuilds its index
      kvEvents: { port: 5557, replayPort: 15557, topicPrefix: 'kv@' },
    })));
    // AND the peers find each other through a headless Service of their own, apart from the client Service
    const peers = manifests.find((m: any) => m.kind === 'Service' && m.metadata.name === 'llama-3-3-70b-router-peers');
    expect(peers.spec).toEqual({
      clusterIP: 'None',
      selector: find(manifests, 'Deployment', '-router').spec.selector.matchLabels,
      ports: [{ name: 'peer', port: 8100, targetPort: 'peer', protocol: 'TCP' }],
    });
    expect(container(find(manifests, 'Deployment', '-router')).ports).toContainEqual({ name: 'peer', containerPort: 8100, protocol: 'TCP' });
    const client = manifests.find((m: any) => m.kind === 'Service' && m.metadata.name === 'llama-3-3-70b-router');
    expect(client.spec.ports.map((p: any) => p.port)).toEqual([80]);
    // AND each worker keeps its last 10,000 event batches on the replay port
    const vllm = container(find(manifests, 'Deployment', '-decode'));
    expect(JSON.parse(flag(vllm.args, '--kv-events-config')!).replay_endpoint).toBe('tcp://*:15557');
    expect(vllm.ports).toContainEqual({ name: 'kv-replay', containerPort: 15557, protocol: 'TCP' });
    // AND a single router has no peer to ask
    const alone = synthInference(defaultProps({ routerReplicas: 1 }));
    expect(JSON.parse(alone.inference.routerConfig).router.peers).toBeUndefined();
    expect(alone.manifests.filter((m: any) => m.metadata.name === 'llama-3-3-70b-router-peers')).toEqual([]);
    // With the model's tokenizer (downloaded by default) the prefix scorer reads the KV-event index;
    // without it, the router's own routing history (auto).
    expect(config.policy).toEqual({
      name: 'kv-aware',
      weights: { prefix: 5, queue: 2, kvUsage: 2 },
      disaggregation: { minUncachedPromptTokens: 1024 },
      prefixSource: 'auto',
    });
    // AND the numbers each pool was resolved to are on the construct's typed plan (for `disagg local`)
    const kv = KvCacheFootprint.of({ model: ModelArchitecture.LLAMA_3_3_70B, precision: Precision.FP8 });
    const decode = inference._router.pools[1];
    expect(decode).toMatchObject({ name: 'decode', role: 'decode', replicas: 2, tensorParallel: 4, maxConcurrencyPerReplica: plan.maxConcurrency });
    expect(decode.kvTokensPerReplica).toBe(plan.kvTokens);
    expect(decode.cost.model.kvBytesPerToken).toBe(kv.bytesPerToken);
    expect(decode.cost.model.weightBytesPerRank).toBe(Math.round(plan.weightBytesPerRank));
    expect(decode.cost.hardware.hbmBytesPerSecond).toBe(4800e9);
    expect(decode.cost.hardware.peakFlopsPerSecond).toBe(1979e12);
    expect(decode.cost.parallel?.tensorParallel).toBe(4);
  });

  test('config: every key is one `disagg-engine router` reads (router_config_json.cc, routing_policy_config.cc)', () => {
    // GIVEN the keys the router's configuration readers name (their whole-word string literals)
    const reader = fs.readFileSync(ROUTER_CONFIG_CC, 'utf8') + fs.readFileSync(POLICY_CONFIG_CC, 'utf8');
    const read = new Set([...reader.matchAll(/"([A-Za-z][A-Za-z0-9]*)"/g)].map(m => m[1]));
    expect(read).toContain('servedModelName');
    // WHEN the construct writes its configuration, with a per-rank expert-parallel side as well
    const configs = [
      synthInference(defaultProps()).inference.routerConfig,
      synthChart(c => new DisaggregatedInference(c, 'Ds', deepseekEpPdProps({ endpoints: DataParallelEndpoints.PER_RANK }))).result.routerConfig,
    ];
    const keys = new Set<string>();
    const collect = (v: unknown): void => {
      if (Array.isArray(v)) {
        v.forEach(collect);
      } else if (v !== null && typeof v === 'object') {
        for (const [k, inner] of Object.entries(v)) {
          keys.add(k);
          collect(inner);
        }
      }
    };
    configs.forEach(c => collect(JSON.parse(c)));
    expect(keys).toContain('ports');
    // THEN the router reads every key written (the file carries nothing it ignores)
    expect([...keys].filter(k => !read.has(k))).toEqual([]);
  });

  test('config validates against the router sections of engine/schema/engine-config.schema.json', () => {
    // GIVEN the engine's schema (a router file needs only its own sections) and the synthesized config
    const validate = routerConfigValidator();
    const { inference } = synthInference(defaultProps());
    // WHEN validated THEN it passes
    const ok = validate(JSON.parse(inference.routerConfig));
    expect(validate.errors ?? []).toEqual([]);
    expect(ok).toBe(true);
    // AND a file that is neither a router file nor a cost-model file is refused
    const { router: _router, ...rest } = JSON.parse(inference.routerConfig);
    expect(validate(rest)).toBe(false);
  });

  test('pendingBlocksMs goes to policy.options (the engine\'s policy knob) only when given, and is bounded as the engine bounds it', () => {
    // GIVEN the default policy and one with a shorter pending-blocks window
    const policyOf = (routerPolicy: RouterPolicy) =>
      JSON.parse(synthInference(defaultProps({ routerPolicy })).inference.routerConfig).policy;
    // THEN the default writes no options (the engine's 2000 ms applies)
    expect(policyOf(RouterPolicy.KV_AWARE).options).toBeUndefined();
    // AND an explicit window is written where the engine reads policy knobs, and validates
    const validate = routerConfigValidator();
    const { inference } = synthInference(defaultProps({ routerPolicy: RouterPolicy.kvAware({ pendingBlocksMs: 500 }) }));
    const config = JSON.parse(inference.routerConfig);
    expect(config.policy.options).toEqual({ pendingBlocksMs: 500 });
    expect(validate(config)).toBe(true);
    expect(policyOf(RouterPolicy.kvAware({ pendingBlocksMs: 0 })).options).toEqual({ pendingBlocksMs: 0 });
    // AND a window the engine would refuse is an error naming the prop and the fix
    expect(() => RouterPolicy.kvAware({ pendingBlocksMs: -5 })).toThrow(/'pendingBlocksMs' \(-5\) must be a whole number of milliseconds from 0 to 600000/);
    expect(() => RouterPolicy.kvAware({ pendingBlocksMs: 1.5 })).toThrow(/'pendingBlocksMs' \(1.5\)/);
  });
});
