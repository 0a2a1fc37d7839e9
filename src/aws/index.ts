export * from './accelerated-node-group';
export * from './cluster-addons';
export * from './efa-security-group';
export * from './engine-image';
export * from './inference-cluster';
export * from './load-balancer-annotations';
export * from './node-capacity';
export * from './karpenter-node-pool';
