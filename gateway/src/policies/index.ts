export * from './policy.ts';
export { CacheAwarePolicy, type CacheAwareConfig } from './cache-aware.ts';
export { PrefixHashPolicy, type PrefixHashConfig } from './prefix-hash.ts';
export { LeastLoadPolicy, computeBacklogSeconds, type LeastLoadConfig } from './least-load.ts';
export { RoundRobinPolicy } from './round-robin.ts';
export { buildPolicy, assertNever, type RoutingConfig } from './factory.ts';
