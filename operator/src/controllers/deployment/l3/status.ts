// What status says of each L3 tier: its claim, and whether every replica can share it.
// SGLang 0.5.23's file backend reports neither capacity nor usage (no metric, no endpoint):
// the capacity is the claim's, as the storage system bound it.
import type { V1PersistentVolumeClaim } from '@kubernetes/client-node';
import type { L3TierStatus } from '#api';
import { L3_MOUNT, type FileL3Plan } from './plan.ts';

export const L3Reason = {
  ClaimNotFound: 'ClaimNotFound',
  ClaimPending: 'ClaimPending',
  NotReadWriteMany: 'NotReadWriteMany',
} as const;

export type LiveClaim = Pick<V1PersistentVolumeClaim, 'spec' | 'status'>;

export function computeL3Status(plan: FileL3Plan, claim: LiveClaim | undefined): L3TierStatus {
  const base = {
    role: plan.role,
    backend: plan.backend,
    claim: plan.claimName,
    managed: plan.managed,
    directory: plan.directory,
  };
  if (!claim)
    return {
      ...base,
      reachable: false,
      reason: plan.managed ? L3Reason.ClaimPending : L3Reason.ClaimNotFound,
      message: plan.managed
        ? `the operator is making PersistentVolumeClaim ${plan.claimName}`
        : `PersistentVolumeClaim ${plan.claimName} (hicache.storage.volume.claimName) does not exist in this namespace: create a ReadWriteMany claim of that name, or leave claimName out and the operator makes one`,
    };
  const accessModes = claim.status?.accessModes ?? claim.spec?.accessModes ?? [];
  const capacity = claim.status?.capacity?.['storage'];
  const seen = { ...base, accessModes, ...(capacity === undefined ? {} : { capacity: String(capacity) }) };
  // Checked before the phase: a claim that binds still cannot be shared across nodes.
  if (!accessModes.includes('ReadWriteMany'))
    return {
      ...seen,
      reachable: false,
      reason: L3Reason.NotReadWriteMany,
      message: `PersistentVolumeClaim ${plan.claimName} is ${accessModes.join(', ') || 'without access modes'}: replicas on other nodes cannot mount it and L3 is not shared; name a ReadWriteMany claim (a storage class that offers it: NFS, CephFS, a cloud file store)`,
    };
  const phase = claim.status?.phase ?? 'Pending';
  if (phase !== 'Bound')
    return {
      ...seen,
      reachable: false,
      reason: L3Reason.ClaimPending,
      message: `PersistentVolumeClaim ${plan.claimName} is ${phase}: the replicas mount ${L3_MOUNT} once it is bound (a WaitForFirstConsumer class binds with the first pod)`,
    };
  return { ...seen, reachable: true };
}
