export * from './catalog';
export * from './aws';
export * from './sizing';
export * from './k8s';
