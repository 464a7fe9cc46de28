import type { DeploymentSpec, EndpointRole, HiCacheSpec, HiSparseSpec, Profile, Resources } from '#api';
import type { z } from 'zod';

/** One engine of a Deployment: the standalone server, or the prefill or decode part. */
export interface RoleEngine {
  role: EndpointRole;
  replicas: number;
  profile: Profile;
  radixCache: 'enabled' | 'disabled' | undefined;
  hicache: z.infer<typeof HiCacheSpec> | undefined;
  hisparse: z.infer<typeof HiSparseSpec> | undefined;
  resources: Resources;
}

/** The engines a spec declares, with per-part resources falling back to spec.resources. */
export function planRoles(spec: DeploymentSpec): RoleEngine[] {
  const d = spec.disaggregation;
  if (!d) {
    return [
      {
        role: 'standalone',
        replicas: spec.replicas ?? 1,
        profile: spec.profile ?? 'dense',
        radixCache: spec.radixCache,
        hicache: spec.hicache,
        hisparse: spec.hisparse,
        resources: spec.resources,
      },
    ];
  }
  return (['prefill', 'decode'] as const).map((role) => {
    const part = d[role];
    return {
      role,
      replicas: part.replicas,
      profile: part.profile,
      radixCache: part.radixCache,
      hicache: part.hicache,
      hisparse: part.hisparse,
      resources: { ...spec.resources, ...part.resources },
    };
  });
}
