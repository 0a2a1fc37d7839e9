import { Size, SizeRoundingBehavior } from 'cdk8s';

/**
 * Options of {@link KvStoreEndpoint.engineKvStore}: the project's `disagg-engine kvstore`.
 */
export interface EngineKvStoreOptions {
  /** Image holding `disagg-engine` (the slim engine image, `images/engine-slim`). */
  readonly image: string;
  /** Memory tier of the store (`--memory-bytes`); the pod's memory request adds 10% and 2 GiB. */
  readonly memory: Size;
  /**
   * Disk tier of the store on the node's NVMe (`--disk-bytes`, under `/mnt/k8s-disks/0/kvstore`).
   * @default - no disk tier
   */
  readonly disk?: Size;
  /**
   * Node labels the store's pod selects.
   * @default - the instance type of the first pool the cache attaches to (its NVMe RAID0 holds the
   * disk tier), tolerating the accelerator taint
   */
  readonly nodeSelector?: { [key: string]: string };
  /**
   * CPUs the store requests.
   * @default 4
   */
  readonly cpu?: number;
}

/**
 * The shared remote KV tier: the project's kvstore (emitted by the `TieredKvCache`) or any Redis or
 * Valkey endpoint. LMCache reaches either with its Redis connector (`LMCACHE_REMOTE_URL`).
 *
 * A union-like class.
 */
export class KvStoreEndpoint {
  /**
   * A `disagg-engine kvstore` StatefulSet (RESP2 on port 6379, Prometheus metrics on 9121) with its
   * headless Service, created by the cache.
   */
  public static engineKvStore(options: EngineKvStoreOptions): KvStoreEndpoint {
    const memoryGib = options.memory.toGibibytes({ rounding: SizeRoundingBehavior.NONE });
    if (!(memoryGib >= 1)) {
      throw new Error(`'engineKvStore.memory' (${memoryGib} GiB) must be at least 1 GiB; e.g. Size.gibibytes(64)`);
    }
    const diskGib = options.disk?.toGibibytes({ rounding: SizeRoundingBehavior.NONE });
    if (diskGib !== undefined && !(diskGib >= 1)) {
      throw new Error(`'engineKvStore.disk' (${diskGib} GiB) must be at least 1 GiB, or omit it for a memory-only store`);
    }
    const cpu = options.cpu ?? 4;
    if (!(Number.isFinite(cpu) && cpu > 0)) {
      throw new Error(`'engineKvStore.cpu' (${cpu}) must be a positive number of CPUs`);
    }
    return new KvStoreEndpoint('engine-kvstore', undefined, { ...options, cpu });
  }

  /**
   * An existing Redis or Valkey server: `redis://host:port` (or `rediss://` for TLS).
   */
  public static redis(url: string): KvStoreEndpoint {
    if (!/^rediss?:\/\/[^\s/:]+(:\d{1,5})?\/?$/.test(url ?? '')) {
      throw new Error(`'redis' url ('${url}') must be 'redis://host:port' or 'rediss://host:port', e.g. 'redis://valkey.cache.svc:6379'`);
    }
    return new KvStoreEndpoint('redis', url, undefined);
  }

  /** 'engine-kvstore' or 'redis'. */
  public readonly kind: string;
  /**
   * The Redis URL of an existing server.
   * @default - resolved from the kvstore Service
   */
  public readonly url?: string;
  /**
   * The kvstore options.
   * @default - none for an existing server
   */
  public readonly engineKvStoreOptions?: EngineKvStoreOptions;

  private constructor(kind: string, url?: string, engineKvStoreOptions?: EngineKvStoreOptions) {
    this.kind = kind;
    this.url = url;
    this.engineKvStoreOptions = engineKvStoreOptions;
  }
}
