export * from './precision';
export * from './accelerator';
export * from './instance-type';
export * from './model';
