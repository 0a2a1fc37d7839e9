import { Chart, Lazy, SizeRoundingBehavior } from 'cdk8s';
import { k8s } from 'cdk8s-plus-28';
import { Construct } from 'constructs';
import { KvCacheBackend } from './kv-cache-backend';
import { KvTier } from './kv-tier';
import { Monitoring } from './monitoring';
import { NetworkIsolation } from './network-isolation';
import { APP_PART_OF, componentLabels } from './private/labels';
import { strip } from './private/model-inputs';
import { addServiceMonitor } from './private/monitoring-objects';
import { addKvStorePolicy } from './private/network-policies';
import { workingSetGib } from './private/worker-pod';
import { IServingPool, KvCacheAttachment } from './serving-pool';

/** The kvstore's RESP port (Redis' conventional port) and metrics port (the redis_exporter convention). */
const KVSTORE_PORT = 6379;
const KVSTORE_METRICS_PORT = 9121;
/** The kvstore's disk directory: on the NVMe RAID0 mount of AcceleratedNodeGroup nodes. */
const KVSTORE_DISK_DIR = '/mnt/k8s-disks/0/kvstore';
/** Where LMCache's local-disk tier writes inside a vLLM container (an emptyDir on the node's NVMe). */
const LMCACHE_DISK_DIR = '/var/cache/disagg/lmcache';
/** LMCache's chunk size, tokens (its default, REFERENCE §5). */
const LMCACHE_CHUNK_SIZE = 256;
/** Tier order, fastest first. */
const ORDER = ['host-memory', 'local-nvme', 'remote'];
const FACTORY: Record<string, string> = { 'host-memory': 'hostMemory', 'local-nvme': 'localNvme', 'remote': 'remote' };

/**
 * Props of {@link TieredKvCache}.
 */
export interface TieredKvCacheProps {
  /**
   * The tiers below the accelerators' own prefix cache (HBM, always present), fastest first:
   * `KvTier.hostMemory(...)`, `KvTier.localNvme(...)`, `KvTier.remote(...)`, each at most once.
   */
  readonly tiers: KvTier[];
  /**
   * What moves blocks between tiers.
   * @default - KvCacheBackend.NATIVE for a host-memory tier alone, else KvCacheBackend.LMCACHE
   */
  readonly backend?: KvCacheBackend;
  /**
   * Name of the kvstore StatefulSet and Service (a remote `KvStoreEndpoint.engineKvStore` tier).
   * @default 'kvstore'
   */
  readonly name?: string;
  /**
   * Namespace of the kvstore objects (the pools' namespace: the Redis URL uses it).
   * @default - the chart's namespace
   */
  readonly namespace?: string;
  /**
   * Which pods may connect to the kvstore (a NetworkPolicy): the library's pods in its namespace, and
   * `metricsFrom` on the metrics port.
   * @default NetworkIsolation.workersBehindRouter()
   */
  readonly networkIsolation?: NetworkIsolation;
  /**
   * Scraping of the kvstore (a remote `KvStoreEndpoint.engineKvStore` tier): `Monitoring.prometheusOperator()`
   * emits a ServiceMonitor `<name>` on its Service's `metrics` port (the `kvstore_*` series of
   * docs/monitoring.md), with the options' scrape interval and labels; its alerts and dashboards options
   * apply to a `DisaggregatedInference` only. Nothing to scrape without an engine kvstore.
   * @default Monitoring.none()
   */
  readonly monitoring?: Monitoring;
}

/**
 * Offloads KV cache from accelerator memory to host memory, local NVMe and a shared store, so prefixes
 * evicted from HBM are loaded back instead of recomputed.
 *
 * Attach it to pools (`attachTo`): the prefill or decode pool of a `DisaggregatedInference`, an
 * `ExpertParallelPool`, or any `IServingPool`. It emits, per backend:
 * - native: `--kv-offloading-backend native --kv-offloading-size <GiB>` on a pool without another
 *   connector, or an `OffloadingConnector` (`cpu_bytes_to_use`) inside a `MultiConnector` after NIXL;
 * - LMCache: `LMCacheConnectorV1` (alone, or after NIXL in a `MultiConnector`) and `LMCACHE_*` env:
 *   chunk size, local CPU and disk sizes per rank, the remote URL.
 * It grows each pod's memory request to hold the host tier, mounts an emptyDir on the node's NVMe for
 * the disk tier, and for a `KvStoreEndpoint.engineKvStore` remote tier emits the kvstore StatefulSet
 * and its headless Service.
 *
 * Validation: tiers in order, each at least as large as the one above (the host tier at least the
 * pod's HBM KV cache); the host tier plus vLLM's working set and /dev/shm fits the pod's share of the
 * instance's RAM less a 5% reserve; the disk tier fits the pod's share of the instance store less the
 * model cache; native offloading has a host tier only.
 */
export class TieredKvCache extends Construct {
  /** The tiers, fastest first. */
  public readonly tiers: KvTier[];
  /** The backend in use. */
  public readonly backend: KvCacheBackend;
  /**
   * The Redis URL of the remote tier.
   * @default - no remote tier
   */
  public readonly remoteUrl?: string;
  /** The pools the cache is attached to. */
  public readonly pools: IServingPool[] = [];
  private readonly where: string;

  constructor(scope: Construct, id: string, props: TieredKvCacheProps) {
    super(scope, id);
    this.where = `TieredKvCache '${this.node.path}'`;
    const tiers = props.tiers ?? [];
    if (tiers.length === 0) {
      throw new Error(`${this.where}: 'tiers' is empty; add KvTier.hostMemory(Size.gibibytes(...)) (the HBM prefix cache is always there)`);
    }
    const kinds = tiers.map(t => t.kind);
    for (let i = 0; i < kinds.length; i++) {
      if (kinds.indexOf(kinds[i]) !== i) {
        throw new Error(`${this.where}: 'tiers' has two ${FACTORY[kinds[i]]} tiers; keep one of each kind`);
      }
      if (i > 0 && ORDER.indexOf(kinds[i]) < ORDER.indexOf(kinds[i - 1])) {
        throw new Error(`${this.where}: 'tiers' lists ${FACTORY[kinds[i]]} after ${FACTORY[kinds[i - 1]]}; order them fastest first: hostMemory, localNvme, remote`);
      }
    }
    const backend = props.backend ?? (kinds.length === 1 && kinds[0] === 'host-memory' ? KvCacheBackend.NATIVE : KvCacheBackend.LMCACHE);
    if (backend === KvCacheBackend.NATIVE && kinds.some(k => k !== 'host-memory')) {
      const others = kinds.filter(k => k !== 'host-memory').map(k => FACTORY[k]).join(' and ');
      throw new Error(`${this.where}: 'backend' (native) keeps offloaded blocks in host memory only in vLLM 0.19, but 'tiers' has ${others}; ` +
        'use KvCacheBackend.LMCACHE or keep only KvTier.hostMemory');
    }
    if (kinds[0] !== 'host-memory') {
      throw new Error(`${this.where}: 'tiers' starts with ${FACTORY[kinds[0]]}; every transfer is staged through host memory, so start with KvTier.hostMemory(...)`);
    }
    this.tiers = tiers;
    this.backend = backend;
    const tierAbove = (i: number) => tiers[i - 1];
    for (let i = 1; i < tiers.length; i++) {
      const t = tiers[i];
      const above = tierAbove(i);
      if (t.sizeGib !== undefined && above.sizeGib !== undefined && t.sizeGib < above.sizeGib) {
        throw new Error(`${this.where}: '${FACTORY[t.kind]}' (${fmt(t.sizeGib)} GiB) is smaller than the ${FACTORY[above.kind]} tier above it ` +
          `(${fmt(above.sizeGib)} GiB); a lower tier holds what the upper one evicts, so make it at least ${fmt(above.sizeGib)} GiB`);
      }
    }

    const remote = tiers.find(t => t.kind === 'remote');
    const store = remote?.endpoint?.engineKvStoreOptions;
    if (remote !== undefined && store === undefined) {
      this.remoteUrl = remote.endpoint!.url;
    }
    if (store !== undefined) {
      const name = props.name ?? 'kvstore';
      if (!/^[a-z]([-a-z0-9]{0,50}[a-z0-9])?$/.test(name)) {
        throw new Error(`${this.where}: 'name' ('${name}') must be a DNS label (lower case, digits, '-', starting with a letter)`);
      }
      const namespace = props.namespace ?? Chart.of(this).namespace;
      this.remoteUrl = `redis://${namespace ? `${name}.${namespace}.svc.cluster.local` : name}:${KVSTORE_PORT}`;
      const labels = componentLabels(name, 'kvstore');
      const meta = (objectName: string): k8s.ObjectMeta => strip({ name: objectName, namespace, labels: { ...labels, [APP_PART_OF]: 'disagg' } });
      const memoryGib = Math.ceil(store.memory.toGibibytes({ rounding: SizeRoundingBehavior.NONE }));
      const diskGib = store.disk ? Math.ceil(store.disk.toGibibytes({ rounding: SizeRoundingBehavior.NONE })) : undefined;
      const args = ['kvstore', '--bind', '$(POD_IP)', '--port', String(KVSTORE_PORT), '--memory-bytes', `${memoryGib}g`];
      if (diskGib !== undefined) {
        args.push('--disk-dir', KVSTORE_DISK_DIR, '--disk-bytes', `${diskGib}g`);
      }
      args.push('--metrics-port', String(KVSTORE_METRICS_PORT));
      // The store's own index, buffers and connections on top of its memory tier.
      const podMemory = k8s.Quantity.fromString(`${Math.ceil(memoryGib * 1.1 + 2)}Gi`);
      const placement = (): Pick<k8s.PodSpec, 'nodeSelector' | 'tolerations'> => {
        if (store.nodeSelector !== undefined) {
          return { nodeSelector: store.nodeSelector };
        }
        const pool = this.pools[0];
        if (pool === undefined) {
          return {};
        }
        return {
          nodeSelector: { 'node.kubernetes.io/instance-type': pool.instanceType.name },
          tolerations: [{ key: pool.instanceType.acceleratorResourceName, operator: 'Exists', effect: 'NoSchedule' }],
        };
      };
      new k8s.KubeStatefulSet(this, 'KvStore', {
        metadata: meta(name),
        spec: {
          serviceName: name,
          replicas: 1,
          selector: { matchLabels: labels },
          template: {
            metadata: { labels },
            // Produced at synthesis: the placement follows the first pool the cache is attached to.
            spec: Lazy.any({
              produce: (): k8s.PodSpec => ({
                automountServiceAccountToken: false,
                // 65532: the slim image's non-root user; fsGroup makes the emptyDir writable for it.
                securityContext: { runAsNonRoot: true, runAsUser: 65532, runAsGroup: 65532, fsGroup: 65532, seccompProfile: { type: 'RuntimeDefault' } },
                ...placement(),
                containers: [{
                  name: 'kvstore',
                  image: store.image,
                  command: ['disagg-engine'],
                  args,
                  env: [{ name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } }],
                  ports: [
                    { name: 'resp', containerPort: KVSTORE_PORT, protocol: 'TCP' },
                    { name: 'metrics', containerPort: KVSTORE_METRICS_PORT, protocol: 'TCP' },
                  ],
                  readinessProbe: { tcpSocket: { port: k8s.IntOrString.fromString('resp') }, periodSeconds: 5, failureThreshold: 3 },
                  livenessProbe: {
                    httpGet: { path: '/metrics', port: k8s.IntOrString.fromString('metrics') }, periodSeconds: 15, failureThreshold: 4, timeoutSeconds: 5,
                  },
                  resources: {
                    requests: { cpu: k8s.Quantity.fromString(String(store.cpu ?? 4)), memory: podMemory },
                    limits: { memory: podMemory },
                  },
                  securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } },
                  ...(diskGib !== undefined ? { volumeMounts: [{ name: 'data', mountPath: KVSTORE_DISK_DIR }] } : {}),
                }],
                // The disk tier in an emptyDir: on the node's NVMe RAID0 (the kubelet's root on
                // AcceleratedNodeGroup nodes), kept across container restarts; 5% slack for segment rounding.
                ...(diskGib !== undefined ? { volumes: [{ name: 'data', emptyDir: { sizeLimit: k8s.Quantity.fromString(`${Math.ceil(diskGib * 1.05)}Gi`) } }] } : {}),
              }),
            }),
          },
        },
      });
      new k8s.KubeService(this, 'KvStoreService', {
        metadata: meta(name),
        spec: {
          clusterIp: 'None',
          selector: labels,
          ports: [
            { name: 'resp', port: KVSTORE_PORT, targetPort: k8s.IntOrString.fromString('resp'), protocol: 'TCP' },
            { name: 'metrics', port: KVSTORE_METRICS_PORT, targetPort: k8s.IntOrString.fromString('metrics'), protocol: 'TCP' },
          ],
        },
      });
      const monitoring = props.monitoring?.prometheusOperatorOptions;
      if (monitoring !== undefined) {
        addServiceMonitor(this, 'KvStoreServiceMonitor', { name, namespace, options: monitoring, labels, port: 'metrics' });
      }
      addKvStorePolicy(this, {
        isolation: props.networkIsolation ?? NetworkIsolation.workersBehindRouter(),
        name,
        namespace,
        labels,
        port: KVSTORE_PORT,
        metricsPort: KVSTORE_METRICS_PORT,
      });
    }
  }

  /**
   * Attaches the cache to a pool: checks the tiers against its pods and adds the connector, env,
   * memory and disk.
   *
   * @returns this cache, to attach to more pools
   * @throws when a tier does not fit the pool's pods, or the pool has a cache already
   */
  public attachTo(pool: IServingPool): TieredKvCache {
    const where = `${this.where} on pool '${pool.poolName}'`;
    const type = pool.instanceType;
    if (type.isNeuron) {
      // KV offloading (LMCache, OffloadingConnector) is not among the features vLLM Neuron's features guide
      // describes (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/vllm-neuron/docs/guides/features-guide.html).
      throw new Error(`${where}: the pool runs on ${type.name} (Trainium), and vLLM Neuron documents no KV cache offloading to host memory, ` +
        'disk or a remote store (LMCache, OffloadingConnector); leave TieredKvCache off Trainium pools');
    }
    const host = this.tiers[0].sizeGib!;
    const hbmGib = pool.kvCacheBytesPerPod / 2 ** 30;
    if (host < hbmGib) {
      throw new Error(`${where}: 'hostMemory' (${fmt(host)} GiB) is smaller than the ${fmt(hbmGib)} GiB of KV cache a pod holds in accelerator memory; ` +
        `a lower tier holds what the upper one evicts, so use at least ${Math.ceil(hbmGib)} GiB`);
    }
    const working = workingSetGib(pool.acceleratorsPerPod);
    const limit = pool.hostMemoryGibPerPod - working - pool.sharedMemoryGib;
    if (host > limit) {
      throw new Error(`${where}: 'hostMemory' (${fmt(host)} GiB) plus vLLM's working set (${working} GiB) and /dev/shm (${pool.sharedMemoryGib} GiB) ` +
        `exceeds the ${pool.hostMemoryGibPerPod} GiB a pod of ${pool.acceleratorsPerPod} accelerators may use on ${type.name} ` +
        `(its share of ${type.memoryGib} GiB less a 5% reserve); use at most ${Math.floor(Math.max(0, limit))} GiB`);
    }
    const disk = this.tiers.find(t => t.kind === 'local-nvme')?.sizeGib;
    if (disk !== undefined && disk > pool.localDiskGibPerPod) {
      throw new Error(`${where}: 'localNvme' (${fmt(disk)} GiB) exceeds the ${pool.localDiskGibPerPod} GiB of instance-store NVMe a pod may fill on ${type.name} ` +
        `(its share of ${type.localNvmeCount} x ${type.localNvmeGbEach} GB less a 10% reserve and the model cache); use at most ${pool.localDiskGibPerPod} GiB`);
    }
    pool.attachKvCache(this.attachment(pool, host, disk));
    this.pools.push(pool);
    return this;
  }

  private attachment(pool: IServingPool, hostGib: number, diskGib: number | undefined): KvCacheAttachment {
    const description = this.node.path;
    if (this.backend === KvCacheBackend.NATIVE) {
      // --kv-offloading-size is per server process (all its TP ranks together), GiB.
      const perProcess = round2(hostGib / pool.serverProcessesPerPod);
      return {
        description,
        connectorConfig: JSON.stringify({
          kv_connector: 'OffloadingConnector',
          kv_role: 'kv_both',
          kv_connector_extra_config: { cpu_bytes_to_use: Math.floor(perProcess * 2 ** 30) },
        }),
        standaloneArgs: ['--kv-offloading-backend', 'native', '--kv-offloading-size', String(perProcess)],
        hostMemoryGib: hostGib,
      };
    }
    // LMCache runs one engine per accelerator rank: its sizes are per rank (GiB; LMCache reads them as 2^30 bytes).
    const ranks = pool.acceleratorsPerPod;
    const env: Record<string, string> = {
      LMCACHE_CHUNK_SIZE: String(LMCACHE_CHUNK_SIZE),
      LMCACHE_LOCAL_CPU: 'True',
      LMCACHE_MAX_LOCAL_CPU_SIZE: String(round2(hostGib / ranks)),
    };
    if (diskGib !== undefined) {
      env.LMCACHE_LOCAL_DISK = `file://${LMCACHE_DISK_DIR}/`;
      env.LMCACHE_MAX_LOCAL_DISK_SIZE = String(round2(diskGib / ranks));
    }
    if (this.remoteUrl !== undefined) {
      env.LMCACHE_REMOTE_URL = this.remoteUrl;
      env.LMCACHE_REMOTE_SERDE = 'naive';
    }
    return {
      description,
      connectorConfig: JSON.stringify({ kv_connector: 'LMCacheConnectorV1', kv_role: 'kv_both' }),
      env,
      hostMemoryGib: hostGib,
      diskMountPath: diskGib !== undefined ? LMCACHE_DISK_DIR : undefined,
      diskGib,
    };
  }
}

function round2(n: number): number {
  return Math.floor(n * 100) / 100;
}

function fmt(n: number): string {
  return Number.isInteger(n) ? String(n) : n.toFixed(1);
}
