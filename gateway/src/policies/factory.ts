import type { z } from 'zod';
import type { RoutingSettings } from '#api';
import { CacheAwarePolicy } from './cache-aware.ts';
import { LeastLoadPolicy } from './least-load.ts';
import type { Policy } from './policy.ts';
import { PrefixHashPolicy } from './prefix-hash.ts';
import { RoundRobinPolicy } from './round-robin.ts';

export type RoutingConfig = z.output<typeof RoutingSettings>;

export function assertNever(x: never): never {
  throw new Error(`unhandled case: ${JSON.stringify(x)}`);
}

/** One policy instance per deployment: its state (tree, cursor) is per deployment. */
export function buildPolicy(settings: RoutingConfig): Policy {
  const policy = settings.policy;
  switch (policy) {
    case 'cache-aware':
      return new CacheAwarePolicy(settings.cacheAware);
    case 'prefix-hash':
      return new PrefixHashPolicy(settings.prefixHash);
    case 'least-load':
      return new LeastLoadPolicy();
    case 'round-robin':
      return new RoundRobinPolicy();
    default:
      return assertNever(policy);
  }
}
