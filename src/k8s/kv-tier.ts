import { Size, SizeRoundingBehavior } from 'cdk8s';
import { KvStoreEndpoint } from './kv-store-endpoint';

/**
 * One tier of a {@link TieredKvCache} below the accelerator's own (HBM) prefix cache, which is always
 * there. Tiers go from fast to slow: host memory, local NVMe, a shared remote store; each must be at
 * least as large as the one above it.
 *
 * A union-like class.
 */
export class KvTier {
  /**
   * Pinned host memory of each pod (vLLM's CPU offloading, or LMCache's local CPU backend). The pod's
   * memory request grows by this size.
   *
   * @param size per pod
   */
  public static hostMemory(size: Size): KvTier {
    return new KvTier('host-memory', positiveGib('hostMemory', size), undefined);
  }

  /**
   * Files on the node's local NVMe (LMCache's local disk backend), in an emptyDir of this size on the
   * NVMe RAID0 array.
   *
   * @param size per pod
   */
  public static localNvme(size: Size): KvTier {
    return new KvTier('local-nvme', positiveGib('localNvme', size), undefined);
  }

  /**
   * A store every pod shares (LMCache's remote backend): the project's kvstore, or Redis/Valkey.
   */
  public static remote(endpoint: KvStoreEndpoint): KvTier {
    const o = endpoint.engineKvStoreOptions;
    const exact = { rounding: SizeRoundingBehavior.NONE };
    const gib = o === undefined ? undefined : o.memory.toGibibytes(exact) + (o.disk?.toGibibytes(exact) ?? 0);
    return new KvTier('remote', gib, endpoint);
  }

  /** 'host-memory', 'local-nvme' or 'remote'. */
  public readonly kind: string;
  /**
   * Capacity, GiB (per pod for host and NVMe; the whole store for a kvstore remote).
   * @default - unknown for an existing Redis server
   */
  public readonly sizeGib?: number;
  /**
   * The remote store.
   * @default - none for local tiers
   */
  public readonly endpoint?: KvStoreEndpoint;

  private constructor(kind: string, sizeGib: number | undefined, endpoint: KvStoreEndpoint | undefined) {
    this.kind = kind;
    this.sizeGib = sizeGib;
    this.endpoint = endpoint;
  }
}

function positiveGib(factory: string, size: Size): number {
  const gib = size.toGibibytes({ rounding: SizeRoundingBehavior.NONE });
  if (!(gib > 0)) {
    throw new Error(`'KvTier.${factory}' size (${gib} GiB) must be positive, e.g. Size.gibibytes(256)`);
  }
  return gib;
}
