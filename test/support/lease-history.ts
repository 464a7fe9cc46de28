// Every record a Lease goes through, read from a watch on the real API server, so a
// leader-election test asserts what the candidates wrote (who held it, when they took
// it, whether the old holder released it) instead of timing a handover on its own clock.
import { readFileSync } from 'node:fs';
import { KubeConfig } from '@kubernetes/client-node';
import { expect, onTestFinished } from 'vitest';
import { KubeClient } from '#kube/client.ts';
import { Resources } from '#kube/resources.ts';
import { parseTime } from '#kube/time.ts';
import type { Lease, LeaseSpec } from '../../operator/src/manager/leader.ts';

export interface LeaseHistory {
  // The records in the order the API server stored them, starting with the one it held
  // when the history began.
  readonly records: readonly LeaseSpec[];
}

// Starts recording now (call it inside a test: the watch ends with the test). A record
// changed after this returns is seen, however soon: the watch resumes from the list's
// resourceVersion.
export async function recordLeaseHistory(
  kubeconfig: string,
  namespace: string,
  name: string,
): Promise<LeaseHistory> {
  const kc = new KubeConfig();
  kc.loadFromString(readFileSync(kubeconfig, 'utf8'));
  const client = await KubeClient.fromKubeConfig(kc);
  const fieldSelector = `metadata.name=${name}`;
  const list = await client.list<Lease>(Resources.leases, { namespace, fieldSelector });
  const records: LeaseSpec[] = list.items.map((l) => l.spec ?? {});
  const abort = new AbortController();
  const watching = (async () => {
    for await (const ev of client.watch<Lease>(Resources.leases, {
      namespace,
      fieldSelector,
      resourceVersion: list.metadata?.resourceVersion,
      signal: abort.signal,
    })) {
      if (ev.type === 'ADDED' || ev.type === 'MODIFIED') records.push(ev.object.spec ?? {});
    }
  })().catch((err: unknown) => {
    if (!abort.signal.aborted) throw err;
  });
  onTestFinished(async () => {
    abort.abort();
    await watching;
    await client.close();
  });
  return { records };
}

// The holders in turn, a repeat (a renewal) folded: ['a', '', 'b'] is a released
// handover, ['a', 'b'] one where b took a lease nobody released.
function holdersInTurn(history: LeaseHistory): string[] {
  const out: string[] = [];
  for (const r of history.records) {
    const holder = r.holderIdentity ?? '';
    if (out.at(-1) !== holder) out.push(holder);
  }
  return out;
}

// The handover from `from` to `to`: from's last record and to's first.
function findHandover(
  history: LeaseHistory,
  from: string,
  to: string,
): { last: LeaseSpec; taken: LeaseSpec } {
  const last = history.records.findLast((r) => r.holderIdentity === from);
  const taken = history.records.find((r) => r.holderIdentity === to);
  if (!last || !taken)
    throw new Error(`no handover from ${from} to ${to} in ${JSON.stringify(history.records)}`);
  return { last, taken };
}

// When a record expires: its renewal plus its duration, on the writer's clock.
const expiryOf = (r: LeaseSpec): number =>
  (parseTime(r.renewTime) ?? Number.NaN) + (r.leaseDurationSeconds ?? 0) * 1000;
const acquiredAt = (r: LeaseSpec): number => parseTime(r.acquireTime) ?? Number.NaN;

// A crash: nothing released the lease, and `to` took it no earlier than from's last
// renewal expired (it waited out the lease instead of stealing it). One transition.
export function expectTakenAfterExpiry(history: LeaseHistory, from: string, to: string): void {
  expect(holdersInTurn(history)).toEqual([from, to]);
  const { last, taken } = findHandover(history, from, to);
  expect(acquiredAt(taken), `${to} acquired before ${from}'s lease expired`).toBeGreaterThanOrEqual(
    expiryOf(last),
  );
  expect(taken.leaseTransitions).toBe((last.leaseTransitions ?? 0) + 1);
}

// A clean stop: `from` cleared the holder, and `to` took the free lease before from's last
// renewal would have expired (it did not wait for expiry). One transition.
export function expectTakenAfterRelease(history: LeaseHistory, from: string, to: string): void {
  expect(holdersInTurn(history)).toEqual([from, '', to]);
  const { last, taken } = findHandover(history, from, to);
  expect(acquiredAt(taken), `${to} waited for ${from}'s lease to expire`).toBeLessThan(expiryOf(last));
  expect(taken.leaseTransitions).toBe((last.leaseTransitions ?? 0) + 1);
}
