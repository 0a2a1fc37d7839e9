import { k8s } from 'cdk8s-plus-28';
import { KvCacheAttachment } from '../serving-pool';

/** Where a cache's disk directory is mounted when it names none. */
export const KV_DISK_VOLUME = 'kv-disk';

/**
 * What was added to a pool after construction (internal): env, arguments and a KV cache. Read when the
 * pool's objects are produced at synthesis.
 */
export class PoolExtras {
  private readonly envs = new Map<string, string>();
  private readonly extraArgs: string[] = [];
  private cache?: KvCacheAttachment;

  constructor(private readonly where: string) {}

  public addEnv(name: string, value: string): void {
    if (!/^[-._a-zA-Z][-._a-zA-Z0-9]*$/.test(name ?? '')) {
      throw new Error(`${this.where}: addEnv name ('${name}') must be a C identifier-like variable name (letters, digits, '_', '-', '.')`);
    }
    this.envs.set(name, value);
  }

  public addArgs(args: string[]): void {
    this.extraArgs.push(...args);
  }

  public attachKvCache(attachment: KvCacheAttachment): void {
    if (this.cache !== undefined) {
      throw new Error(`${this.where}: a KV cache (${this.cache.description ?? 'kv cache'}) is attached already; ` +
        `attach one TieredKvCache per pool (${attachment.description ?? 'kv cache'} is the second)`);
    }
    JSON.parse(attachment.connectorConfig);
    this.cache = attachment;
  }

  public get kvCache(): KvCacheAttachment | undefined {
    return this.cache;
  }

  /** Arguments appended after the generated ones. */
  public get args(): string[] {
    return [...this.extraArgs];
  }

  /** `{name, value}` entries: the cache's env first, then addEnv's (which win). */
  public env(): k8s.EnvVar[] {
    const merged = new Map<string, string>(Object.entries(this.cache?.env ?? {}));
    for (const [k, v] of this.envs) merged.set(k, v);
    return [...merged].map(([name, value]) => ({ name, value }));
  }

  /**
   * The KV connector arguments of one server process: the pool's own connector (NIXL), the cache's, a
   * MultiConnector of both (the pool's first, so a remote prefill's KV is pulled before offloaded
   * blocks are looked up), or none.
   */
  public kvTransferArgs(own: Record<string, unknown> | undefined): string[] {
    const cache = this.cache;
    if (cache === undefined) {
      return own === undefined ? [] : ['--kv-transfer-config', JSON.stringify(own)];
    }
    const theirs = JSON.parse(cache.connectorConfig);
    if (own === undefined) {
      return cache.standaloneArgs ?? ['--kv-transfer-config', JSON.stringify(theirs)];
    }
    // vLLM's scheduler reads kv_load_failure_policy from the top-level config, not a MultiConnector's parts.
    const { kv_load_failure_policy: policy, ...nixl } = own;
    return ['--kv-transfer-config', JSON.stringify({
      kv_connector: 'MultiConnector',
      kv_role: 'kv_both',
      kv_connector_extra_config: { connectors: [nixl, theirs] },
      ...(policy !== undefined ? { kv_load_failure_policy: policy } : {}),
    })];
  }

  /** Merges env entries, the extras replacing generated ones of the same name. */
  public mergeEnv(generated: k8s.EnvVar[]): k8s.EnvVar[] {
    const extra = this.env();
    const names = new Set(extra.map(e => e.name));
    return [...generated.filter(e => !names.has(e.name)), ...extra];
  }

  /** Adds the cache's host memory to a container's memory request and limit. */
  public applyResources(resources: k8s.ResourceRequirements, baseMemoryGib: number, minimumGib: number): k8s.ResourceRequirements {
    const memory = Math.max(baseMemoryGib, minimumGib);
    if (memory === baseMemoryGib) {
      return resources;
    }
    const quantity = k8s.Quantity.fromString(`${memory}Gi`);
    return {
      requests: { ...resources.requests, memory: quantity },
      limits: { ...resources.limits, memory: quantity },
    };
  }

  /** The cache's disk volume and mount, if any. */
  public diskVolume(): { volume: k8s.Volume; mount: k8s.VolumeMount } | undefined {
    const cache = this.cache;
    if (cache?.diskMountPath === undefined) {
      return undefined;
    }
    return {
      volume: { name: KV_DISK_VOLUME, emptyDir: cache.diskGib !== undefined ? { sizeLimit: k8s.Quantity.fromString(`${Math.ceil(cache.diskGib)}Gi`) } : {} },
      mount: { name: KV_DISK_VOLUME, mountPath: cache.diskMountPath },
    };
  }
}
