/**
 * What a pool does with a request.
 *
 * An enum-like class. Prefill and decode pools move KV cache with NIXL (`--kv-transfer-config`
 * NixlConnector) and sit behind a router that splits each request; a serving pool runs whole requests.
 */
export class PoolRole {
  /** Whole requests: prompt and generation on the same pod. */
  public static readonly SERVE = new PoolRole('serve');
  /** Computes the prompt's KV cache and hands it to a decode pod. */
  public static readonly PREFILL = new PoolRole('prefill');
  /** Pulls the prompt's KV cache from a prefill pod and generates. */
  public static readonly DECODE = new PoolRole('decode');

  /** 'serve', 'prefill' or 'decode'. */
  public readonly name: string;

  private constructor(name: string) {
    this.name = name;
  }
}
