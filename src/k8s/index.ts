export * from './model-source';
export * from './model-cache';
export * from './router-policy';
export * from './kv-transfer';
export * from './gateway-exposure';
export * from './inference-pool-options';
export * from './disaggregated-inference';
