import { describe, expect, it } from 'vitest';
import {
  validateResource,
  type CachePolicyResource,
  type CachePolicyStatus,
  type DeploymentResource,
  type Endpoint,
  type KnowledgeDelivery,
} from '#api';
import { loadSample } from '../../../../test/support/samples.ts';
import {
  DOCUMENT_RECHECK_MS,
  computeRetryDelayMs,
  planCachePolicyStep,
  type CachePolicyObservation,
  type CachePolicyStep,
  type WarmupJobState,
} from './plan.ts';
import type { WarmupTarget } from './warmup.ts';

const T0 = Date.parse('2026-12-01T10:00:00Z');
const at = (s: number): Date => new Date(T0 + s * 1000);
const iso = (s: number): string => new Date(T0 + s * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z');

function parse<T>(doc: unknown): T {
  const r = validateResource(doc);
  if (!r.ok) throw new Error(JSON.stringify(r.issues));
  return r.value as T;
}

const ep = (pod: string, o: Partial<Endpoint> = {}): Endpoint => ({
  pod,
  ip: `10.244.0.${pod.length}`,
  port: 30000,
  role: 'standalone',
  ready: true,
  verified: true,
  restartCount: 0,
  fingerprint: 'f1',
  ...o,
});

function policyWith(status?: CachePolicyStatus, spec: Record<string, unknown> = {}): CachePolicyResource {
  const doc = loadSample('cachepolicy.yaml');
  doc.metadata = {
    name: 'team-a',
    namespace: 'ns',
    creationTimestamp: iso(-3600),
    generation: 1,
  } as typeof doc.metadata;
  doc.spec['targetRefs'] = [{ kind: 'Deployment', name: 'llama-8b' }];
  Object.assign(doc.spec, spec);
  const p = parse<CachePolicyResource>(doc);
  return status ? { ...p, status } : p;
}

function deployment(endpoints: Endpoint[]): DeploymentResource {
  const d = parse<DeploymentResource>(loadSample('deployment-dense.yaml'));
  return { ...d, metadata: { ...d.metadata, namespace: 'ns' }, status: { endpoints } };
}

function observe(
  policy: CachePolicyResource,
  endpoints: Endpoint[],
  o: Partial<CachePolicyObservation> = {},
): CachePolicyObservation {
  return {
    policies: [policy],
    deployments: new Map([['llama-8b', deployment(endpoints)]]),
    jobs: new Map(),
    ...o,
  };
}

const docs = { ok: true as const, texts: ['the handbook'] };
const warmupOf = (s: CachePolicyStatus) => s.targets?.[0]?.warmup;
const warmedCondition = (s: CachePolicyStatus) => s.conditions?.find((c) => c.type === 'Warmed');

describe('planCachePolicyStep: warm-up off the reconcile loop', () => {
  it('asks for the documents before it starts a warm-up, and writes nothing meanwhile', () => {
    const p = policyWith();
    const step = planCachePolicyStep(p, observe(p, [ep('a')]), at(0));
    expect(step.actions).toEqual([{ type: 'readDocuments' }]);
    expect(step.keepJobs).toEqual([]);
  });

  it('starts a new verified endpoint as Warming, since now, and does not wait for it', () => {
    const p = policyWith();
    const step = planCachePolicyStep(p, observe(p, [ep('a')], { documents: docs }), at(0));
    expect(step.actions).toEqual([
      {
        type: 'startWarmup',
        target: expect.objectContaining({ key: 'ns/a#0', pod: 'a' }),
        documents: ['the handbook'],
      },
    ]);
    expect(warmupOf(step.status)).toEqual([{ pod: 'a', restartCount: 0, state: 'Warming', since: iso(0) }]);
    expect(warmedCondition(step.status)).toMatchObject({ status: 'False', reason: 'Warming' });
    expect(step.keepJobs).toEqual(['ns/a#0']);
  });

  it('keeps a running job Warming with its first since, and starts nothing twice', () => {
    const p = policyWith({
      targets: [
        {
          name: 'llama-8b',
          accepted: true,
          reason: 'Accepted',
          warmup: [{ pod: 'a', restartCount: 0, state: 'Warming', since: iso(0) }],
        },
      ],
    });
    const jobs = new Map<string, WarmupJobState>([['ns/a#0', { state: 'running', since: T0 }]]);
    const step = planCachePolicyStep(p, observe(p, [ep('a')], { jobs }), at(30));
    expect(step.actions).toEqual([]);
    expect(warmupOf(step.status)).toEqual([{ pod: 'a', restartCount: 0, state: 'Warming', since: iso(0) }]);
  });

  it('records a settled job as Warmed with an event, and lets the job go', () => {
    const p = policyWith({
      targets: [
        {
          name: 'llama-8b',
          accepted: true,
          reason: 'Accepted',
          warmup: [{ pod: 'a', restartCount: 0, state: 'Warming', since: iso(0) }],
        },
      ],
    });
    const jobs = new Map<string, WarmupJobState>([
      ['ns/a#0', { state: 'succeeded', at: T0 + 4000, documents: 1 }],
    ]);
    const step = planCachePolicyStep(p, observe(p, [ep('a')], { jobs }), at(5));
    expect(warmupOf(step.status)).toEqual([
      { pod: 'a', restartCount: 0, state: 'Warmed', since: iso(0), warmedAt: iso(4) },
    ]);
    expect(step.events).toEqual([expect.objectContaining({ type: 'Normal', reason: 'WarmedUp' })]);
    expect(step.keepJobs).toEqual([]);
    expect(warmedCondition(step.status)).toMatchObject({ status: 'True', reason: 'AllEndpointsWarmed' });
  });

  it('keeps Warmed across passes without a job (operator restart) and without reading documents', () => {
    const p = policyWith({
      targets: [
        {
          name: 'llama-8b',
          accepted: true,
          reason: 'Accepted',
          warmup: [{ pod: 'a', restartCount: 0, state: 'Warmed', since: iso(0), warmedAt: iso(4) }],
        },
      ],
    });
    const step = planCachePolicyStep(p, observe(p, [ep('a')]), at(600));
    expect(step.actions).toEqual([]);
    expect(warmupOf(step.status)?.[0]?.state).toBe('Warmed');
  });

  // The bug this guards: the warmed mark was the pod name, so a restarted container
  // (same pod, empty cache) was never warmed again.
  it('warms a restarted container again: a new instance, a new entry, the old one gone', () => {
    const p = policyWith({
      targets: [
        {
          name: 'llama-8b',
          accepted: true,
          reason: 'Accepted',
          warmup: [{ pod: 'a', restartCount: 0, state: 'Warmed', since: iso(0), warmedAt: iso(4) }],
        },
      ],
    });
    const step = planCachePolicyStep(
      p,
      observe(p, [ep('a', { restartCount: 1 })], { documents: docs }),
      at(900),
    );
    expect(step.actions).toEqual([
      {
        type: 'startWarmup',
        target: expect.objectContaining({ key: 'ns/a#1' }),
        documents: ['the handbook'],
      },
    ]);
    expect(warmupOf(step.status)).toEqual([{ pod: 'a', restartCount: 1, state: 'Warming', since: iso(900) }]);
  });

  it('keeps the entry of an instance that is momentarily not ready, and drops one whose pod went away', () => {
    const p = policyWith({
      targets: [
        {
          name: 'llama-8b',
          accepted: true,
          reason: 'Accepted',
          warmup: [
            { pod: 'a', restartCount: 0, state: 'Warmed', since: iso(0), warmedAt: iso(4) },
            { pod: 'gone', restartCount: 0, state: 'Warmed', since: iso(0), warmedAt: iso(4) },
          ],
        },
      ],
    });
    const step = planCachePolicyStep(p, observe(p, [ep('a', { ready: false })]), at(60));
    expect(warmupOf(step.status)?.map((e) => e.pod)).toEqual(['a']);
  });

  it('marks a failed attempt Failed with the error and retries after the backoff', () => {
    const p = policyWith({
      targets: [
        {
          name: 'llama-8b',
          accepted: true,
          reason: 'Accepted',
          warmup: [{ pod: 'a', restartCount: 0, state: 'Warming', since: iso(0) }],
        },
      ],
    });
    const jobs = new Map<string, WarmupJobState>([
      ['ns/a#0', { state: 'failed', at: T0 + 2000, error: 'POST …: HTTP 503', failures: 1 }],
    ]);
    const early = planCachePolicyStep(p, observe(p, [ep('a')], { jobs, documents: docs }), at(3));
    expect(warmupOf(early.status)).toEqual([
      { pod: 'a', restartCount: 0, state: 'Failed', since: iso(0), attempts: 1, message: 'POST …: HTTP 503' },
    ]);
    expect(early.events).toEqual([expect.objectContaining({ type: 'Warning', reason: 'WarmupFailed' })]);
    expect(early.actions).toEqual([{ type: 'requeue', afterMs: 2000 + computeRetryDelayMs(1) - 3000 }]);
    expect(warmedCondition(early.status)).toMatchObject({ status: 'False', reason: 'WarmupFailing' });
    expect(early.keepJobs).toEqual(['ns/a#0']);
    const due = planCachePolicyStep(
      { ...p, status: early.status },
      observe(p, [ep('a')], { jobs, documents: docs }),
      at(8),
    );
    expect(due.actions.map((a) => a.type)).toEqual(['startWarmup']);
    expect(due.events).toEqual([]); // the same failure is reported once
  });

  it('says a missing document in a condition and an event, and looks again later', () => {
    const p = policyWith();
    const missing = {
      ok: false as const,
      message: 'warm-up document shared-knowledge/handbook.md not found: create the ConfigMap key',
    };
    const step = planCachePolicyStep(p, observe(p, [ep('a')], { documents: missing }), at(0));
    expect(warmedCondition(step.status)).toMatchObject({
      status: 'False',
      reason: 'WarmupDocumentMissing',
      message: missing.message,
    });
    expect(step.events).toEqual([
      { type: 'Warning', reason: 'WarmupDocumentMissing', message: missing.message },
    ]);
    expect(step.actions).toEqual([{ type: 'requeue', afterMs: DOCUMENT_RECHECK_MS }]);
    expect(warmupOf(step.status)).toEqual([
      { pod: 'a', restartCount: 0, state: 'Pending', since: iso(0), message: missing.message },
    ]);
  });

  it('drops every job and the Warmed condition when the policy no longer declares warm-up', () => {
    const p = policyWith(
      {
        conditions: [
          {
            type: 'Warmed',
            status: 'True',
            reason: 'AllEndpointsWarmed',
            message: '',
            lastTransitionTime: iso(0),
          },
        ],
      },
      { warmup: undefined },
    );
    const jobs = new Map<string, WarmupJobState>([['ns/a#0', { state: 'running', since: T0 }]]);
    const step = planCachePolicyStep(p, observe(p, [ep('a')], { jobs }), at(1));
    expect(step.keepJobs).toEqual([]);
    expect(warmedCondition(step.status)).toBeUndefined();
    expect(warmupOf(step.status)).toBeUndefined();
  });

  it('warms nothing of a target it does not govern', () => {
    const p = policyWith(undefined, { targetRefs: [{ kind: 'Deployment', name: 'nope' }] });
    const step = planCachePolicyStep(p, observe(p, [ep('a')], { documents: docs }), at(0));
    expect(step.actions).toEqual([]);
    expect(warmedCondition(step.status)).toMatchObject({ status: 'True', message: '0 endpoint(s) warmed' });
  });
});

describe('planCachePolicyStep: knowledge delivered once into a shared L3 tier (ADR 0042)', () => {
  type Target = NonNullable<CachePolicyStatus['targets']>[number];
  type WarmupEntry = NonNullable<Target['warmup']>[number];

  function withL3(endpoints: Endpoint[], reachable = true): DeploymentResource {
    const d = deployment(endpoints);
    return {
      ...d,
      status: { ...d.status, l3: [{ role: 'standalone', backend: 'file', reachable, directory: 'kv/f1' }] },
    };
  }
  const observeL3 = (
    policy: CachePolicyResource,
    endpoints: Endpoint[],
    o: Partial<CachePolicyObservation> = {},
    reachable = true,
  ): CachePolicyObservation => ({
    policies: [policy],
    deployments: new Map([['llama-8b', withL3(endpoints, reachable)]]),
    jobs: new Map(),
    documents: docs,
    ...o,
  });
  /** A policy whose one target (llama-8b, accepted) has `o`: its warm-up entries, its deliveries. */
  const policyWithTarget = (o: Partial<Target>): CachePolicyResource =>
    policyWith({ targets: [{ name: 'llama-8b', accepted: true, reason: 'Accepted', ...o }] });
  /** A warm-up entry of the first container (restart 0) since the start. */
  const entry = (pod: string, state: WarmupEntry['state'], o: Partial<WarmupEntry> = {}): WarmupEntry => ({
    pod,
    restartCount: 0,
    state,
    since: iso(0),
    ...o,
  });
  /** Replica a's delivery at 4 s of the rendering r1 (412 tokens, 400 stored). */
  const delivery = (o: Partial<KnowledgeDelivery> = {}): KnowledgeDelivery => ({
    role: 'standalone',
    fingerprint: 'f1',
    pod: 'a',
    restartCount: 0,
    deliveredAt: iso(4),
    cacheSalt: '',
    rendered: 'r1',
    tokens: 412,
    storedTokens: 400,
    ...o,
  });
  /** The warm-up job of a pod's container that succeeded: one document, prefilled, rendered r1. */
  const succeeded = (key: string, o: Partial<Extract<WarmupJobState, { state: 'succeeded' }>> = {}) =>
    new Map<string, WarmupJobState>([
      [key, { state: 'succeeded', at: T0 + 4000, documents: 1, source: 'prefill', rendered: 'r1', ...o }],
    ]);
  const delivered = (s: CachePolicyStatus) => s.targets?.[0]?.delivered;
  const saltOf = (p: CachePolicyResource, endpoints: Endpoint[]) =>
    planCachePolicyStep(p, observeL3(p, endpoints), at(0)).status.targets?.[0]?.cacheSalt ?? '';
  const starts = (step: CachePolicyStep): WarmupTarget[] =>
    step.actions.flatMap((a) => (a.type === 'startWarmup' ? [a.target] : []));

  it('prefills one replica of the tier while the others wait for it', () => {
    const p = policyWith();
    const step = planCachePolicyStep(p, observeL3(p, [ep('a'), ep('b')]), at(0));
    expect(starts(step).map((t) => [t.pod, t.l3, t.deliveredRendering])).toEqual([['a', true, undefined]]);
    expect(warmupOf(step.status)).toEqual([
      entry('a', 'Warming'),
      entry('b', 'Pending', { message: 'waiting for a to deliver the documents into the L3 tier' }),
    ]);
  });

  it('warms every replica itself when the tier is not reachable', () => {
    const p = policyWith();
    const step = planCachePolicyStep(p, observeL3(p, [ep('a'), ep('b')], {}, false), at(0));
    expect(starts(step).map((t) => [t.pod, t.l3])).toEqual([
      ['a', false],
      ['b', false],
    ]);
  });

  it('records the delivery, then starts the others with its rendering: they load, not prefill', () => {
    const p = policyWithTarget({ warmup: [entry('a', 'Warming'), entry('b', 'Pending')] });
    const salt = saltOf(p, [ep('a'), ep('b')]);
    const jobs = succeeded('ns/a#0', { tokens: 412, storedTokens: 400, warnings: [] });
    const step = planCachePolicyStep(p, observeL3(p, [ep('a'), ep('b')], { jobs }), at(5));
    expect(delivered(step.status)).toEqual([delivery({ cacheSalt: salt })]);
    expect(starts(step).map((t) => [t.pod, t.deliveredRendering])).toEqual([['b', 'r1']]);
    expect(warmupOf(step.status)?.[0]).toMatchObject({ pod: 'a', state: 'Warmed', source: 'prefill' });
    expect(step.events.map((e) => e.reason)).toEqual(['DeliveredToL3', 'WarmedUp']);
  });

  it('marks a replica that loads from the tier Warmed from storage, and keeps the delivery', () => {
    const record = delivery({ cacheSalt: saltOf(policyWith(), [ep('a'), ep('b')]) });
    const p = policyWithTarget({
      delivered: [record],
      warmup: [entry('a', 'Warmed', { warmedAt: iso(4), source: 'prefill' }), entry('b', 'Warming')],
    });
    const jobs = succeeded('ns/b#0', { at: T0 + 6000, source: 'storage' });
    const step = planCachePolicyStep(p, observeL3(p, [ep('a'), ep('b')], { jobs }), at(7));
    expect(warmupOf(step.status)?.[1]).toEqual(entry('b', 'Warmed', { warmedAt: iso(6), source: 'storage' }));
    expect(delivered(step.status)).toEqual([record]);
    expect(step.events.map((e) => e.reason)).toEqual(['LoadsFromL3']);

    // A restarted container (a new instance) starts at once with the delivered rendering.
    const later = planCachePolicyStep(
      { ...p, status: step.status },
      observeL3(p, [ep('a'), ep('b', { restartCount: 1 })]),
      at(60),
    );
    expect(starts(later).map((t) => [t.key, t.deliveredRendering])).toEqual([['ns/b#1', 'r1']]);
  });

  it('delivers again under a new salt: a delivery of another salt is dropped', () => {
    const p = policyWithTarget({ delivered: [delivery({ cacheSalt: 'an-old-salt' })] });
    const step = planCachePolicyStep(p, observeL3(p, [ep('b')]), at(10));
    expect(delivered(step.status)).toBeUndefined();
    expect(starts(step).map((t) => [t.pod, t.deliveredRendering])).toEqual([['b', undefined]]);
  });

  it('says when the chat template makes the prefix vary: a Warning and the entry message', () => {
    const p = policyWith();
    const warning = 'warmup.documents[0]: the chat template writes the date into the prompt';
    const jobs = succeeded('ns/a#0', { at: T0 + 1000, rendered: 'r', warnings: [warning] });
    const step = planCachePolicyStep(p, observeL3(p, [ep('a')], { jobs }), at(2));
    expect(step.events).toContainEqual({ type: 'Warning', reason: 'WarmupPrefixVaries', message: warning });
    expect(warmupOf(step.status)?.[0]).toMatchObject({ state: 'Warmed', message: warning });
  });
});
