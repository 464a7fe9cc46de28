export * from './key.ts';
export * from './store.ts';
export * from './reuse.ts';
