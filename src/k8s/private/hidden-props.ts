/**
 * Keys of props a DisaggregatedInference passes to the ExpertParallelPool it creates (internal: symbol
 * keys stay out of the public, jsii-visible props).
 */
/** Prefix of pool fields in error messages, e.g. 'decodeExpertParallel'. */
export const FIELD_PREFIX = Symbol.for('disagg.fieldPrefix');
/** The NIXL backend the deployment resolved for both sides. */
export const NIXL_BACKEND = Symbol.for('disagg.nixlBackend');
/** The app.kubernetes.io/instance label of the deployment. */
export const INSTANCE = Symbol.for('disagg.instance');
