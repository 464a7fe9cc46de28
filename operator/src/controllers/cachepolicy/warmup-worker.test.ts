import { describe, expect, it } from 'vitest';
import type { ObjectKey } from '#kube/objects.ts';
import type { WarmupTarget } from './warmup.ts';
import type { WarmupOutcome } from './warmup-send.ts';
import { WarmupWorker } from './warmup-worker.ts';

const outcomeOf = (error?: string): WarmupOutcome =>
  error === undefined
    ? { ok: true, source: 'prefill', rendered: 'r', tokens: 1, storedTokens: 0, warnings: [] }
    : { ok: false, error };

/** A run whose calls wait until the test settles them (a gate, not a timer). */
function gatedRun() {
  const calls: { target: WarmupTarget; signal: AbortSignal; settle: (error?: string) => void }[] = [];
  const run = (target: WarmupTarget, _docs: readonly string[], signal: AbortSignal) =>
    new Promise<WarmupOutcome>((resolve) => {
      calls.push({ target, signal, settle: (error) => resolve(outcomeOf(error)) });
      signal.addEventListener('abort', () => resolve(outcomeOf('cancelled')), { once: true });
    });
  return { calls, run };
}

const target = (pod: string, restartCount = 0): WarmupTarget => ({
  key: `ns/${pod}#${restartCount}`,
  namespace: 'ns',
  deployment: 'llama-8b',
  pod,
  restartCount,
  fingerprint: 'f1',
  model: 'llama-8b',
  url: `http://${pod}`,
  salt: 's',
  role: 'standalone',
  l3: false,
  pageSize: 1,
});
const P: ObjectKey = { namespace: 'ns', name: 'team-a' };
const flush = () => new Promise((r) => setImmediate(r));

describe('WarmupWorker', () => {
  it('runs at most `concurrency` warm-ups at once, the rest in order', async () => {
    const { calls, run } = gatedRun();
    const w = new WarmupWorker({ run, onSettled: () => undefined, concurrency: 2, now: () => 0 });
    for (const pod of ['a', 'b', 'c']) w.start(P, target(pod), ['doc']);
    expect(calls.map((c) => c.target.pod)).toEqual(['a', 'b']);
    expect(w.jobsOf(P).get('ns/c#0')).toEqual({ state: 'queued', since: 0 });
    calls[0]?.settle();
    await flush();
    expect(calls.map((c) => c.target.pod)).toEqual(['a', 'b', 'c']);
  });

  it('never warms one container instance twice at once', () => {
    const { calls, run } = gatedRun();
    const w = new WarmupWorker({ run, onSettled: () => undefined });
    expect(w.start(P, target('a'), ['doc'])).toBe(true);
    expect(w.start(P, target('a'), ['doc'])).toBe(false);
    expect(calls).toHaveLength(1);
  });

  it('records the outcome and queues the policy for reconcile when a warm-up settles', async () => {
    const { calls, run } = gatedRun();
    const settled: ObjectKey[] = [];
    let now = 1000;
    const w = new WarmupWorker({ run, onSettled: (k) => settled.push(k), now: () => now });
    w.start(P, target('a'), ['d1', 'd2']);
    w.start(P, target('b'), ['d1', 'd2']);
    now = 5000;
    calls[0]?.settle();
    calls[1]?.settle('HTTP 503');
    await flush();
    expect(settled).toEqual([P, P]);
    expect(w.jobsOf(P)).toEqual(
      new Map([
        [
          'ns/a#0',
          {
            state: 'succeeded',
            at: 5000,
            documents: 2,
            source: 'prefill',
            rendered: 'r',
            tokens: 1,
            storedTokens: 0,
            warnings: [],
          },
        ],
        ['ns/b#0', { state: 'failed', at: 5000, error: 'HTTP 503', failures: 1 }],
      ]),
    );
    // A retry carries the failure count, which sets the next backoff.
    w.start(P, target('b'), ['d1']);
    calls[2]?.settle('HTTP 503');
    await flush();
    expect(w.jobsOf(P).get('ns/b#0')).toMatchObject({ state: 'failed', failures: 2 });
  });

  it('cancels the jobs a policy no longer wants, and reports nothing for them', async () => {
    const { calls, run } = gatedRun();
    const settled: ObjectKey[] = [];
    const w = new WarmupWorker({ run, onSettled: (k) => settled.push(k), concurrency: 1 });
    w.start(P, target('a'), ['doc']);
    w.start(P, target('b'), ['doc']);
    w.retain(P, new Set(['ns/b#0']));
    expect(calls[0]?.signal.aborted).toBe(true);
    await flush();
    expect(calls.map((c) => c.target.pod)).toEqual(['a', 'b']);
    w.cancel(P);
    expect(calls[1]?.signal.aborted).toBe(true);
    await flush();
    expect(settled).toEqual([]);
    expect(w.jobsOf(P).size).toBe(0);
  });

  it('stops with the operator: running warm-ups are aborted and none start after', async () => {
    const { calls, run } = gatedRun();
    const stop = new AbortController();
    const w = new WarmupWorker({ run, onSettled: () => undefined, signal: stop.signal });
    w.start(P, target('a'), ['doc']);
    stop.abort();
    await flush();
    expect(calls[0]?.signal.aborted).toBe(true);
    expect(w.start(P, target('b'), ['doc'])).toBe(false);
    expect(w.active()).toBe(0);
  });
});
