// Tenants as the gateway holds them: an API key's sha256 → its tenant. Keys
// themselves are never kept (a heap dump or a log line cannot leak one), and a
// presented key is hashed once and looked up: no comparison that leaks timing
// about a stored key.

import type { TenantLimits } from '#api';

export interface Tenant {
  /** namespace/name of the Tenant object (a label value and the salt component). */
  readonly id: string;
  /** Route deployments ("namespace/name") this tenant may call. */
  readonly deployments: ReadonlySet<string>;
  readonly limits: TenantLimits;
  readonly priority: number;
}

/** Why a tenant, or one of its keys, is not in the directory. */
export interface TenantIssue {
  readonly tenant: string;
  readonly code: 'SecretNotFound' | 'NoKeys' | 'KeyTooShort' | 'KeyShared';
  readonly message: string;
}

/**
 * Who is calling. `open`: no keys are checked (every request is the anonymous tenant);
 * `keys`: a request needs a key of a tenant in the directory.
 */
export interface TenantDirectory {
  readonly mode: 'open' | 'keys';
  /** The tenant whose key hashes to `keyHash` (hashApiKey). */
  byKeyHash(keyHash: string): Tenant | undefined;
  tenants(): readonly Tenant[];
  issues(): readonly TenantIssue[];
  /** False until the directory has been read once (discovery): a replica without it is not ready. */
  readonly ready: boolean;
}

/** sha256 in hex: the digest the operator writes for each key (lib/api/gateway-keys.ts). */
export { hashApiKey } from '#api/gateway-keys.ts';

/** The directory of an open gateway: nobody is checked. */
export const OPEN_DIRECTORY: TenantDirectory = {
  mode: 'open',
  byKeyHash: () => undefined,
  tenants: () => [],
  issues: () => [],
  ready: true,
};

/** A directory that is swapped whole on each rebuild (discovery, or a static file read once). */
export class KeyDirectory implements TenantDirectory {
  readonly mode = 'keys' as const;
  ready = false;
  #byHash: ReadonlyMap<string, Tenant> = new Map();
  #tenants: readonly Tenant[] = [];
  #issues: readonly TenantIssue[] = [];

  replace(built: BuiltDirectory): void {
    this.#byHash = built.byHash;
    this.#tenants = built.tenants;
    this.#issues = built.issues;
  }

  byKeyHash(keyHash: string): Tenant | undefined {
    return this.#byHash.get(keyHash);
  }

  tenants(): readonly Tenant[] {
    return this.#tenants;
  }

  issues(): readonly TenantIssue[] {
    return this.#issues;
  }
}

export interface BuiltDirectory {
  readonly byHash: ReadonlyMap<string, Tenant>;
  readonly tenants: readonly Tenant[];
  readonly issues: readonly TenantIssue[];
}
