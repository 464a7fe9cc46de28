import { describe, expect, it } from 'vitest';
import type { Endpoint } from '#api';
import { buildVerifiedEndpoint, planVerification, REVERIFY_AFTER_MS } from './endpoints.ts';
import { type PodView } from './meta/pod-view.ts';

const NOW = Date.parse('2026-11-29T10:00:00Z');
const pod: PodView = {
  name: 'p-1',
  uid: 'u1',
  role: 'standalone',
  ip: '10.244.0.5',
  ready: true,
  fingerprint: 'fp-new',
  restartCount: 0,
  terminating: false,
};
const verifiedBefore = (overrides: Partial<Endpoint> = {}): Endpoint => ({
  pod: 'p-1',
  ip: '10.244.0.5',
  port: 30000,
  role: 'standalone',
  ready: true,
  verified: true,
  fingerprint: 'fp-new',
  restartCount: 0,
  verifiedAt: new Date(NOW - 60_000).toISOString(),
  ...overrides,
});
const current = { fingerprint: 'fp-new', bootstrapPort: undefined, nowMs: NOW };

describe('planVerification', () => {
  it.each<[string, PodView, Endpoint | undefined, string, string?]>([
    [
      'a pod that is not ready is settled as NotReady',
      { ...pod, ready: false },
      undefined,
      'settle',
      'NotReady',
    ],
    ['a ready pod never verified is fetched', pod, undefined, 'fetch'],
    ['a fresh verification of the same process stands', pod, verifiedBefore(), 'keep'],
    ['a restarted container is read again', { ...pod, restartCount: 1 }, verifiedBefore(), 'fetch'],
    ['a new pod IP is read again', { ...pod, ip: '10.244.0.9' }, verifiedBefore(), 'fetch'],
    [
      'a stale verification is read again',
      pod,
      verifiedBefore({ verifiedAt: new Date(NOW - REVERIFY_AFTER_MS - 1).toISOString() }),
      'fetch',
    ],
    ['an earlier failure is retried', pod, verifiedBefore({ verified: false }), 'fetch'],
    [
      'an old-revision pod keeps its earlier verification during a rollout, however old',
      { ...pod, fingerprint: 'fp-old' },
      verifiedBefore({
        fingerprint: 'fp-old',
        verifiedAt: new Date(NOW - 10 * REVERIFY_AFTER_MS).toISOString(),
      }),
      'keep',
    ],
    [
      'an old-revision pod never verified cannot be verified now',
      { ...pod, fingerprint: 'fp-old' },
      undefined,
      'settle',
      'OutdatedRevision',
    ],
    [
      'an old-revision pod that restarted loses its verification',
      { ...pod, fingerprint: 'fp-old', restartCount: 2 },
      verifiedBefore({ fingerprint: 'fp-old' }),
      'settle',
      'OutdatedRevision',
    ],
  ])('%s', (_name, p, previous, action, reason) => {
    const plan = planVerification(p, previous, current);
    expect(plan.action).toBe(action);
    if (reason) expect(plan.action === 'settle' ? plan.endpoint.reason : undefined).toBe(reason);
  });
});

describe('buildVerifiedEndpoint', () => {
  const reported = {
    modelPath: '/models',
    servedModelName: 'm',
    tokenizerPath: '/models',
    version: '0.5.23',
    hicache: false,
    hisparse: false,
    radixCache: true,
    disaggregationMode: 'null',
    tensorParallel: 1,
    priorityScheduling: false,
  };
  it('verifies when nothing differs and stamps the time', () => {
    const e = buildVerifiedEndpoint(pod, undefined, { ok: true, reported, mismatches: '' }, new Date(NOW));
    expect(e).toMatchObject({ verified: true, verifiedAt: new Date(NOW).toISOString(), reported });
    expect(e.reason).toBeUndefined();
  });
  it('publishes the event publishers the runtime advertised, once verified', () => {
    const events = { port: 5557, ranks: 1, topic: 'kv', blockSize: 1, replayPort: 5558 };
    const ok = buildVerifiedEndpoint(
      pod,
      undefined,
      { ok: true, reported, mismatches: '', events },
      new Date(NOW),
    );
    expect(ok.events).toEqual(events);
    const bad = buildVerifiedEndpoint(
      pod,
      undefined,
      { ok: true, reported, mismatches: 'version: declared 0.5.23, runtime reports 0.5.0', events },
      new Date(NOW),
    );
    expect(bad.events).toBeUndefined();
  });
  it('marks a mismatch unverified and says what differs', () => {
    const e = buildVerifiedEndpoint(
      pod,
      undefined,
      { ok: true, reported, mismatches: 'servedModelName: declared a, runtime reports m' },
      new Date(NOW),
    );
    expect(e).toMatchObject({
      verified: false,
      reason: 'IdentityMismatch',
      message: expect.stringContaining('servedModelName'),
    });
  });
  it('marks an unreachable runtime unverified with the error', () => {
    const e = buildVerifiedEndpoint(
      pod,
      undefined,
      { ok: false, error: 'GET http://x/server_info: HTTP 503' },
      new Date(NOW),
    );
    expect(e).toMatchObject({
      verified: false,
      reason: 'VerificationFailed',
      message: expect.stringContaining('503'),
    });
  });
  it('carries the bootstrap port of a prefill endpoint', () => {
    const e = buildVerifiedEndpoint(
      { ...pod, role: 'prefill' },
      8998,
      { ok: true, reported, mismatches: '' },
      new Date(NOW),
    );
    expect(e.bootstrapPort).toBe(8998);
  });
});
