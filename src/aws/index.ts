export * from './accelerated-node-group';
export * from './cluster-addons';
export * from './efa-security-group';
export * from './inference-cluster';
export * from './node-capacity';
