/**
 * What a decode pod does when it cannot pull a prompt's KV cache from the prefill pod (a NIXL read
 * that fails or times out): vLLM's `kv_load_failure_policy` in the decode pool's `--kv-transfer-config`.
 *
 * An enum-like class. The value is written explicitly, since vLLM's own default has changed between
 * releases ('recompute' when the option appeared, 'fail' later).
 *
 * @see https://docs.vllm.ai/en/latest/api/vllm/config/kv_transfer/
 */
export class KvLoadFailurePolicy {
  /**
   * vLLM fails the request (finish reason "error": HTTP 500 "Internal server error", or an error event
   * that opens the stream), and the router retries it decode-only, without the transfer parameters:
   * the decode pod (the same or another) prefills the whole prompt itself. Nothing is relayed to the
   * client before the retry, and the router counts each one
   * (`disagg_router_kv_transfer_fallbacks_total`), so a broken transfer path shows on a dashboard.
   */
  public static readonly FAIL = new KvLoadFailurePolicy('fail');

  /**
   * vLLM reschedules the request on the same decode pod and recomputes the blocks that failed to
   * load: no error and no second request, at the price of prefill work on a decode pod (its other
   * sequences' inter-token latency suffers) that only vLLM's logs show.
   */
  public static readonly RECOMPUTE = new KvLoadFailurePolicy('recompute');

  /** The value of `kv_load_failure_policy`: 'fail' or 'recompute'. */
  public readonly value: string;

  private constructor(value: string) {
    this.value = value;
  }
}
