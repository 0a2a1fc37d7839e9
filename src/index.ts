export * from './catalog';
export * from './aws';
export * from './sizing';
