export * from './sizing-problem';
export * from './weight-footprint';
export * from './kv-cache-footprint';
export * from './memory-budget';
export * from './parallelism';
export * from './parallelism-rules';
export * from './roofline';
export * from './serving-plan';
