/**
 * The software that moves KV blocks between the tiers of a {@link TieredKvCache}.
 *
 * An enum-like class.
 */
export class KvCacheBackend {
  /**
   * vLLM's native offloading (`OffloadingConnector`): GPU <-> pinned host memory by asynchronous DMA.
   * In the pinned vLLM 0.19 it has a host-memory tier only (multi-tier "TieringOffloadingSpec" came
   * later), so local NVMe and remote tiers need LMCache.
   * @see https://docs.vllm.ai/en/latest/features/kv_offloading_usage.html
   */
  public static readonly NATIVE = new KvCacheBackend('native');

  /**
   * LMCache (`LMCacheConnectorV1`, shipped with vLLM's images): host memory, local disk and a remote
   * Redis-protocol store, configured by `LMCACHE_*` environment variables.
   * @see https://docs.lmcache.ai/api_reference/configurations.html
   */
  public static readonly LMCACHE = new KvCacheBackend('lmcache');

  /** 'native' or 'lmcache'. */
  public readonly name: string;

  private constructor(name: string) {
    this.name = name;
  }
}
