/**
 * How prefill pods hand the KV cache of a prompt to decode pods.
 *
 * An enum-like class. Every choice uses vLLM's `NixlConnector`; they differ in the NIXL transport.
 *
 * @see https://docs.vllm.ai/en/latest/features/nixl_connector_usage.html
 */
export class KvTransfer {
  /**
   * NIXL over libfabric on EFA when both pools' instance types have EFA; NIXL over UCX (TCP) otherwise,
   * with a `disagg:tcpKvTransfer` warning.
   */
  public static readonly AUTO = new KvTransfer('auto', undefined);

  /**
   * NIXL with its LIBFABRIC backend over EFA (GPU memory to GPU memory by RDMA). UCX cannot drive EFA,
   * so this is the only fast path on AWS. Requires EFA on both pools' instance types.
   */
  public static readonly NIXL_LIBFABRIC = new KvTransfer('nixl-libfabric', 'LIBFABRIC');

  /**
   * NIXL with its UCX backend, which falls back to TCP on instances without RDMA NICs. Slow: use it for
   * instance types without EFA only.
   */
  public static readonly NIXL_UCX = new KvTransfer('nixl-ucx', 'UCX');

  /** 'auto', 'nixl-libfabric' or 'nixl-ucx'. */
  public readonly name: string;
  /**
   * The NIXL backend (`kv_connector_extra_config.backends`).
   * @default - resolved from the instance types (AUTO)
   */
  public readonly nixlBackend?: string;

  private constructor(name: string, nixlBackend: string | undefined) {
    this.name = name;
    this.nixlBackend = nixlBackend;
  }
}
