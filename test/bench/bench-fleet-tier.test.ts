// The bench's gateway replicas share their load as a production tier does:
// real processes (one simulator, bench-gateway.ts replicas), each replica's
// /metrics read for how many peers its load exchange hears.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import {
  readExchangePeers,
  startRouter,
  startSim,
  stopRouter,
  type FleetContext,
  type Router,
} from './bench-fleet.ts';
import { stopAll, stopProcess } from './bench-procs.ts';
import { readTierFile } from './tier-file.ts';

const logDir = mkdtempSync(path.join(os.tmpdir(), 'bench-tier-'));
const ctx: FleetContext = {
  repo: fileURLToPath(new URL('../../', import.meta.url)),
  logDir,
  log: () => undefined,
};
const routers: Router[] = [];

afterAll(async () => {
  for (const r of routers) await stopRouter(r);
  await stopAll();
  rmSync(logDir, { recursive: true, force: true });
});

describe('startRouter: gateway replicas', () => {
  it('runs R > 1 replicas with the load exchange live among them, and lets a restarted one join', async () => {
    const sim = await startSim(ctx, 'sim-0', []);
    const tier = await startRouter(ctx, 'cache-aware', [sim], 'tier', 2);
    routers.push(tier);
    expect(await Promise.all(tier.urls.map(readExchangePeers))).toEqual([1, 1]);

    // The failover bench's restart: one dies and leaves the tier, a new replica takes its place.
    const leaving = tier.tier?.members[1]?.name ?? '';
    if (tier.procs[1]) await stopProcess(tier.procs[1]);
    const joined = await startRouter(ctx, 'cache-aware', [sim], 'tier-restarted', 1, {
      ...(tier.tier ? { join: tier.tier } : {}),
      leaving: [leaving],
    });
    routers.push(joined);
    expect(await readExchangePeers(joined.urls[0] ?? '')).toBe(1);
    expect(readTierFile(tier.tier?.file ?? '').map((m) => m.name)).toEqual([
      tier.tier?.members[0]?.name,
      'gateway-cache-aware-tier-restarted',
    ]);
  }, 120_000);

  it('runs one replica alone, without an exchange', async () => {
    const sim = await startSim(ctx, 'sim-1', []);
    const solo = await startRouter(ctx, 'cache-aware', [sim], 'solo', 1);
    routers.push(solo);
    expect(solo.tier).toBeUndefined();
    expect(await readExchangePeers(solo.urls[0] ?? '')).toBeNull();
  }, 120_000);
});
