import { describe, expect, it } from 'vitest';
import { QualificationResource } from '#api/resources.ts';
import type { ArmsCheck, ArmView } from './arms.ts';
import { planQualificationStep, slotOf, type QualificationObservations } from './plan.ts';
import type { RequestRecord, SampleRecord } from './record.ts';
import { generateWorkload } from './workload.ts';

const NOW = new Date('2026-12-05T10:00:00Z');
const UID = '0b8f6c1e-0000-4000-8000-000000000001';

function qualification(status?: unknown, spec: Record<string, unknown> = {}) {
  return QualificationResource.parse({
    apiVersion: 'cacheroute.dev/v1alpha1',
    kind: 'Qualification',
    metadata: { name: 'q', namespace: 'ns', uid: UID, generation: 1 },
    spec: {
      arms: [
        { name: 'dense', deployment: { name: 'd' } },
        { name: 'hicache', deployment: { name: 'h' } },
      ],
      workload: {
        generator: { sharedPrefix: { conversations: 2, turns: 2, systemPromptWords: 20, turnWords: 5 } },
      },
      maxOutputTokens: 8,
      concurrency: 1,
      samplesPerArm: 2,
      budget: { maxDurationSeconds: 600, maxTokens: 100000 },
      pricePerGpuHour: '2.00',
      ...spec,
    },
    ...(status ? { status } : {}),
  });
}

const view = (fingerprint: string, pod: string): ArmView => ({
  deploymentId: `${pod}-r1`,
  fingerprint,
  profile: pod === 'd-0' ? 'dense' : 'hicache',
  endpoint: { pod, url: `http://10.0.0.1:30000` },
  gpus: 1,
});
const READY: ArmsCheck = { kind: 'ready', arms: [view('fp-d', 'd-0'), view('fp-h', 'h-0')] };

function obs(records: SampleRecord[] = [], arms: ArmsCheck = READY): QualificationObservations {
  const g = { seed: 1, sharedPrefix: { conversations: 2, turns: 2, systemPromptWords: 20, turnWords: 5 } };
  return { arms, workload: { ok: true, requests: generateWorkload(g) }, records };
}

function request(ttftMs: number, cached: number, simulator = true): RequestRecord {
  return {
    id: 'r',
    ok: true,
    ttftMs,
    e2eMs: ttftMs + 70,
    promptTokens: 100,
    completionTokens: 8,
    cachedTokens: cached,
    cachedDevice: cached,
    cachedHost: 0,
    cachedStorage: 0,
    simulator,
  };
}

function record(slot: number, opts: { warmTtft?: number; simulator?: boolean } = {}): SampleRecord {
  const { armIndex, sample } = slotOf(slot);
  const arm = armIndex === 0 ? 'dense' : 'hicache';
  const warm = opts.warmTtft ?? (arm === 'dense' ? 50 : 20);
  const sim = opts.simulator ?? true;
  return {
    slot,
    arm,
    sample,
    salt: `s${slot}`,
    startedAt: '2026-12-05T09:59:00Z',
    cold: { wallMs: 1000, requests: [request(100, 0, sim), request(101, 0, sim), request(99, 0, sim)] },
    warm: {
      wallMs: 500,
      requests: [request(warm, 90, sim), request(warm + 1, 90, sim), request(warm - 1, 90, sim)],
    },
  };
}

const heldArms = [
  { name: 'dense', deployment: 'd', fingerprint: 'fp-d', samplesDone: 0, samplesFailed: 0, progress: '0/2' },
  {
    name: 'hicache',
    deployment: 'h',
    fingerprint: 'fp-h',
    samplesDone: 0,
    samplesFailed: 0,
    progress: '0/2',
  },
];

describe('planQualificationStep: the arms', () => {
  it('refuses a mismatched pair before any traffic, naming the difference', () => {
    const differences = ['model.digest: dense="sha256:aa" hicache="sha256:bb"'];
    const step = planQualificationStep(qualification(), obs([], { kind: 'mismatch', differences }), NOW);
    expect(step.status.phase).toBe('Refused');
    expect(step.actions.some((a) => a.type === 'runSample')).toBe(false);
    const acc = step.status.conditions?.find((c) => c.type === 'Accepted');
    expect(acc).toMatchObject({ status: 'False', reason: 'ArmsMismatch' });
    expect(acc?.message).toContain('model.digest: dense="sha256:aa" hicache="sha256:bb"');
    expect(step.events).toEqual([expect.objectContaining({ type: 'Warning', reason: 'ArmsMismatch' })]);
  });

  it('runs a refused pair once the arms are fixed, nothing having run', () => {
    const differences = ['profile: dense="dense" hicache="hicache"'];
    const refused = planQualificationStep(qualification(), obs([], { kind: 'mismatch', differences }), NOW);
    const q = qualification(refused.status);
    const step = planQualificationStep(q, obs(), NOW);
    expect(step.status.phase).toBe('Running');
    expect(step.status.conditions?.find((c) => c.type === 'Accepted')).toMatchObject({ status: 'True' });
  });

  it('waits for arms that are not ready yet, without refusing', () => {
    const step = planQualificationStep(
      qualification(),
      obs([], { kind: 'waiting', message: 'Deployment h not found' }),
      NOW,
    );
    expect(step.status.phase).toBe('Pending');
    expect(step.actions).toEqual([{ type: 'requeue', afterMs: 5000 }]);
  });

  it('fails a run whose arm changed identity after it started', () => {
    const q = qualification({ phase: 'Running', startedAt: '2026-12-05T09:59:00Z', arms: heldArms });
    const moved: ArmsCheck = { kind: 'ready', arms: [view('fp-d', 'd-0'), view('fp-h2', 'h-0')] };
    const step = planQualificationStep(q, obs([record(0)], moved), NOW);
    expect(step.status.phase).toBe('Failed');
    expect(step.status.conditions?.find((c) => c.type === 'Failed')).toMatchObject({ reason: 'ArmChanged' });
  });
});

describe('planQualificationStep: the protocol', () => {
  it('alternates the arms round by round', () => {
    expect([0, 1, 2, 3, 4, 5].map((s) => slotOf(s))).toEqual([
      { armIndex: 0, sample: 1 },
      { armIndex: 1, sample: 1 },
      { armIndex: 1, sample: 2 },
      { armIndex: 0, sample: 2 },
      { armIndex: 0, sample: 3 },
      { armIndex: 1, sample: 3 },
    ]);
  });

  it('starts with arm 1 in a fresh cache namespace, holding both identities', () => {
    const step = planQualificationStep(qualification(), obs(), NOW);
    expect(step.status.phase).toBe('Running');
    const run = step.actions.find((a) => a.type === 'runSample');
    expect(run?.type === 'runSample' && run.run).toMatchObject({
      slot: 0,
      arm: 'dense',
      sample: 1,
      salt: `qualification-${UID}-0`,
    });
    expect(step.status.current).toEqual({ slot: 0, arm: 'dense', sample: 1, salt: `qualification-${UID}-0` });
    expect(step.status.arms?.map((a) => a.fingerprint)).toEqual(['fp-d', 'fp-h']);
  });

  it('paces every pass of both arms alike: closed at the concurrency, or open on one schedule', () => {
    const paceAt = (q: ReturnType<typeof qualification>, done: number[]) => {
      const step = planQualificationStep(q, obs(done.map((s) => record(s))), NOW);
      const run = step.actions.find((a) => a.type === 'runSample');
      return run?.type === 'runSample' ? run.run.pace : undefined;
    };
    expect(paceAt(qualification(), [])).toEqual({ kind: 'closed', concurrency: 1 });
    const rate = { requestsPerSecond: 4, seed: 9 };
    const generator = { sharedPrefix: { conversations: 2, turns: 2, systemPromptWords: 20, turnWords: 5 } };
    const held = { phase: 'Running', startedAt: '2026-12-05T09:59:00Z', arms: heldArms };
    const open = qualification(held, { concurrency: undefined, workload: { generator, requestRate: rate } });
    const first = paceAt(open, []);
    expect(first?.kind === 'open' && first.offsetsMs).toHaveLength(4);
    expect(paceAt(open, [0])).toEqual(first); // arm 2's sample: the same arrival times
    expect(() =>
      qualification(undefined, { concurrency: 2, workload: { generator, requestRate: rate } }),
    ).toThrow(/exactly one of spec.concurrency .* or spec.workload.requestRate/);
    expect(() => qualification(undefined, { concurrency: undefined })).toThrow(/exactly one of/);
  });

  it('gives every slot its own salt', () => {
    const q = qualification({ phase: 'Running', startedAt: '2026-12-05T09:59:00Z', arms: heldArms });
    const salts = [0, 1, 2, 3].map((n) => {
      const step = planQualificationStep(q, obs([0, 1, 2, 3].slice(0, n).map((s) => record(s))), NOW);
      const run = step.actions.find((a) => a.type === 'runSample');
      return run?.type === 'runSample' ? run.run.salt : '';
    });
    expect(new Set(salts).size).toBe(4);
  });

  it('records a sample lost mid-flight as failed, then moves on to a fresh slot', () => {
    const current = { slot: 0, arm: 'dense', sample: 1, salt: `qualification-${UID}-0` };
    const q = qualification({ phase: 'Running', startedAt: '2026-12-05T09:59:00Z', arms: heldArms, current });
    const step = planQualificationStep(q, obs(), NOW);
    const store = step.actions.find((a) => a.type === 'storeRecord');
    expect(store?.type === 'storeRecord' && store.record).toMatchObject({ slot: 0, arm: 'dense' });
    expect(store?.type === 'storeRecord' && store.record.failed).toMatch(/^Interrupted/);
    const lost = store?.type === 'storeRecord' ? store.record : record(0);
    const next = planQualificationStep(q, obs([lost]), NOW);
    const run = next.actions.find((a) => a.type === 'runSample');
    expect(run?.type === 'runSample' && run.run).toMatchObject({ slot: 1, arm: 'hicache' });
    expect(next.status.arms?.[0]).toMatchObject({ samplesDone: 0, samplesFailed: 1, progress: '1/2' });
  });

  it('stores each pass’s latency distributions for the status page to plot', () => {
    const q = qualification({ phase: 'Running', startedAt: '2026-12-05T09:59:00Z', arms: heldArms });
    const [dense, hicache] =
      planQualificationStep(q, obs([0, 1, 2, 3].map((s) => record(s))), NOW).status.arms ?? [];
    expect(hicache?.warm?.cdf?.ttftMs?.[10]).toBe(hicache?.warm?.ttftMs?.p50);
    expect(dense?.cold?.cdf?.e2eMs).toHaveLength(21);
    expect(dense?.cold?.cdf?.interTokenMs).toHaveLength(21);
  });

  it('succeeds after every slot, with per-arm summaries, cost and a verdict', () => {
    const q = qualification({ phase: 'Running', startedAt: '2026-12-05T09:59:00Z', arms: heldArms });
    const step = planQualificationStep(q, obs([0, 1, 2, 3].map((s) => record(s))), NOW);
    expect(step.status.phase).toBe('Succeeded');
    expect(step.status.progress).toBe('4/4');
    expect(step.status.evidence).toBe('Simulator');
    const [dense, hicache] = step.status.arms ?? [];
    expect(dense?.warm?.ttftMs?.p50).toBe(50);
    expect(hicache?.warm?.ttftMs?.p50).toBe(20);
    expect(dense?.cold?.cachedTokens).toBe(0);
    expect(hicache?.warm?.cachedShare).toBe(0.9);
    expect(hicache?.samples).toEqual([
      {
        sample: 1,
        failed: false,
        coldCachedShare: 0,
        warmCachedShare: 0.9,
        coldTtftP50Ms: 100,
        warmTtftP50Ms: 20,
      },
      {
        sample: 2,
        failed: false,
        coldCachedShare: 0,
        warmCachedShare: 0.9,
        coldTtftP50Ms: 100,
        warmTtftP50Ms: 20,
      },
    ]);
    expect(dense?.gpuHours).toBe((3000 / 3_600_000).toFixed(6));
    expect(dense?.cost).toBe(((3000 / 3_600_000) * 2).toFixed(6));
    expect(step.status.verdict).toMatchObject({ faster: 'hicache', medianDifferenceMs: -30 });
    expect(step.status.verdict?.highMs).toBeLessThan(0);
    expect(step.status.verdict?.summary).toMatch(/only 2 samples an arm: the interval is coarse/);
    expect(step.actions).toEqual([]);
  });

  it('stops on the time budget and on the token budget', () => {
    const late = qualification({ phase: 'Running', startedAt: '2026-12-05T09:00:00Z', arms: heldArms });
    const t = planQualificationStep(late, obs([record(0)]), NOW);
    expect(t.status.phase).toBe('Stopped');
    expect(t.status.conditions?.find((c) => c.type === 'Complete')).toMatchObject({
      status: 'True',
      reason: 'TimeBudget',
    });
    const small = qualification(
      { phase: 'Running', startedAt: '2026-12-05T09:59:00Z', arms: heldArms },
      { budget: { maxDurationSeconds: 600, maxTokens: 100 } },
    );
    const k = planQualificationStep(small, obs([record(0)]), NOW);
    expect(k.status.phase).toBe('Stopped');
    expect(k.status.conditions?.find((c) => c.type === 'Complete')?.reason).toBe('TokenBudget');
  });

  it('fails a run that saw a simulator and an engine', () => {
    const q = qualification({ phase: 'Running', startedAt: '2026-12-05T09:59:00Z', arms: heldArms });
    const step = planQualificationStep(q, obs([record(0), record(1, { simulator: false })]), NOW);
    expect(step.status.phase).toBe('Failed');
    expect(step.status.conditions?.find((c) => c.type === 'Failed')?.reason).toBe('EvidenceMixed');
    expect(step.status.evidence).toBeUndefined();
  });

  it('does nothing more once finished', () => {
    const q = qualification({ phase: 'Succeeded' });
    expect(planQualificationStep(q, obs(), NOW)).toEqual({ status: q.status, actions: [], events: [] });
  });
});
