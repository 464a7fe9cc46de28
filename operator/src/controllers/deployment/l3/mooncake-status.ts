// What status says of a Mooncake store (ADR 0041): whether the replicas can use it, and its
// capacity and usage as its master counts them (the gauges of its HTTP metrics, which Mooncake
// serves on its metrics port: master_total_capacity_bytes, master_allocated_bytes,
// master_key_count). Pure: the shell reads the store pod and its gauges.
import type { L3TierStatus } from '#api';
import type { MooncakePlan } from './mooncake.ts';

export const MooncakeReason = {
  StoreStarting: 'StoreStarting',
  MasterUnreachable: 'MasterUnreachable',
  NoSegment: 'NoSegment',
} as const;

/** The store's pod as the operator sees it: none yet, or its IP and readiness. */
export interface StorePod {
  readonly ip: string;
  readonly ready: boolean;
}

export type MasterGauges = { ok: true; gauges: ReadonlyMap<string, number> } | { ok: false; error: string };

/** The master's `master_*` gauges from its Prometheus text. */
export function parseMasterGauges(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const m of text.matchAll(/^(master_[a-z_]+)(?:\{[^}]*\})? ([0-9.eE+-]+)$/gm)) {
    const value = Number(m[2]);
    if (Number.isFinite(value)) out.set(m[1] ?? '', value);
  }
  return out;
}

export function computeMooncakeStatus(
  plan: MooncakePlan,
  pod: StorePod | undefined,
  read: MasterGauges | undefined,
): L3TierStatus {
  const base = {
    role: plan.role,
    backend: plan.backend,
    managed: true,
    store: plan.store,
    master: plan.master,
    capacity: plan.capacity,
  };
  if (!pod?.ready || !read)
    return {
      ...base,
      reachable: false,
      reason: MooncakeReason.StoreStarting,
      message: `the Mooncake store ${plan.store} (mooncake_master and a store node of ${plan.capacity}) has no ready pod yet; replicas started before it retry the master`,
    };
  if (!read.ok)
    return {
      ...base,
      reachable: false,
      reason: MooncakeReason.MasterUnreachable,
      message: `mooncake_master of ${plan.store} did not answer on its metrics port: ${read.error}`,
    };
  const g = read.gauges;
  const counted = {
    ...base,
    ...optionalInt('capacityBytes', g.get('master_total_capacity_bytes')),
    ...optionalInt('usedBytes', g.get('master_allocated_bytes')),
    ...optionalInt('objects', g.get('master_key_count')),
  };
  if (!(Number(g.get('master_total_capacity_bytes') ?? 0) > 0))
    return {
      ...counted,
      reachable: false,
      reason: MooncakeReason.NoSegment,
      message: `mooncake_master of ${plan.store} counts no memory: the store node (container store) has not mounted its ${plan.capacity} segment; see its log`,
    };
  return { ...counted, reachable: true };
}

function optionalInt(key: string, v: number | undefined): Record<string, number> {
  return v === undefined ? {} : { [key]: Math.round(v) };
}
