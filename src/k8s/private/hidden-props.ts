/**
 * Props a DisaggregatedInference passes to the ExpertParallelPool it creates (internal: symbol keys stay
 * out of the public, jsii-visible props).
 */
/** Prefix of pool fields in error messages, e.g. 'decodeExpertParallel'. */
export const FIELD_PREFIX: unique symbol = Symbol.for('disagg.fieldPrefix');
/** The NIXL backend the deployment resolved for both sides. */
export const NIXL_BACKEND: unique symbol = Symbol.for('disagg.nixlBackend');
/** kv_load_failure_policy for a decode side ('fail' or 'recompute'). */
export const KV_LOAD_FAILURE_POLICY: unique symbol = Symbol.for('disagg.kvLoadFailurePolicy');
/** The app.kubernetes.io/instance label of the deployment. */
export const INSTANCE: unique symbol = Symbol.for('disagg.instance');

/** The deployment's TPOT SLO, which sizes the drain of leaving pods. */
export const DRAIN_TPOT: unique symbol = Symbol.for('disagg.drainTpot');

/** The hidden props, next to the public ones of an ExpertParallelPool (internal). */
export interface HiddenPoolProps {
  /** @default - error messages name pool fields plainly */
  readonly [FIELD_PREFIX]?: string;
  /** @default - resolved by the pool from its own `kvTransfer` */
  readonly [NIXL_BACKEND]?: string;
  /** @default - no kv_load_failure_policy in the pool's --kv-transfer-config */
  readonly [KV_LOAD_FAILURE_POLICY]?: string;
  /** @default - the pool's own name */
  readonly [INSTANCE]?: string;
  /** @default - DEFAULT_DRAIN_TPOT_SECONDS (drain.ts) */
  readonly [DRAIN_TPOT]?: number;
}
