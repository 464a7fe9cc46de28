import { describe, expect, it } from 'vitest';
import type { TaskStatus } from '#api/task.ts';
import { planReuse } from './reuse.ts';
import { buildTask } from '../../../../test/support/operator/task.ts';

const FP = 'sha256:aaa';
const now = new Date('2026-01-02T00:00:00Z');
const result = { inline: 'hi', sha256: 'sha256:r1', bytes: 2 };

function succeeded(extra: Partial<TaskStatus> = {}): TaskStatus {
  return {
    phase: 'Succeeded',
    fingerprint: FP,
    completedAt: '2026-01-01T12:00:00Z',
    result,
    attempts: [{ attempt: 1, outcome: 'Succeeded', resultSha256: 'sha256:r1' }],
    ...extra,
  };
}

const me = buildTask({ name: 'me', created: '2026-01-01T18:00:00Z' });

describe('planReuse', () => {
  it('reuses a Succeeded task with the same fingerprint within the TTL', () => {
    const src = buildTask({ name: 'src', status: succeeded() });
    expect(planReuse(me, FP, [src], now)).toEqual({
      action: 'reuse',
      source: { name: 'src', fingerprint: FP, result },
    });
  });

  it.each<[string, ReturnType<typeof buildTask>]>([
    [
      'another fingerprint (deploymentId, salt, input...)',
      buildTask({ name: 'src', status: succeeded({ fingerprint: 'sha256:bbb' }) }),
    ],
    [
      'older than the TTL',
      buildTask({ name: 'src', status: succeeded({ completedAt: '2025-12-31T23:59:59Z' }) }),
    ],
    ['a Reused task', buildTask({ name: 'src', status: succeeded({ phase: 'Reused' }) })],
    ['a Failed task', buildTask({ name: 'src', status: succeeded({ phase: 'Failed' }) })],
    [
      'a result that is not the last attempt’s',
      buildTask({
        name: 'src',
        status: succeeded({ attempts: [{ attempt: 1, resultSha256: 'sha256:other' }] }),
      }),
    ],
    [
      'a reworked (rejected) answer',
      buildTask({
        name: 'src',
        status: succeeded({
          attempts: [
            { attempt: 1, resultSha256: 'sha256:r1', reviewDecision: 'Rework', reviewFeedback: 'no' },
            { attempt: 2, resultSha256: 'sha256:r1', reviewDecision: 'Accepted' },
          ],
        }),
      }),
    ],
    ['itself', buildTask({ name: 'me', status: succeeded() })],
  ])('does not reuse %s', (_n, src) => {
    expect(planReuse(me, FP, [src], now)).toEqual({ action: 'generate' });
  });

  it('needs an Accepted source when this task requires review', () => {
    const reviewed = { ...me, spec: { ...me.spec, review: { required: true } } };
    const unreviewed = buildTask({ name: 'a', status: succeeded() });
    expect(planReuse(reviewed, FP, [unreviewed], now)).toEqual({ action: 'generate' });
    const accepted = buildTask({
      name: 'b',
      spec: { review: { required: true, decision: 'Accepted' } },
      status: succeeded({
        attempts: [{ attempt: 1, resultSha256: 'sha256:r1', reviewDecision: 'Accepted' }],
      }),
    });
    expect(planReuse(reviewed, FP, [unreviewed, accepted], now)).toMatchObject({
      action: 'reuse',
      source: { name: 'b' },
    });
  });

  it('does nothing when reuse is disabled', () => {
    const off = buildTask({ name: 'me', spec: { reuse: { enabled: false } } });
    expect(planReuse(off, FP, [buildTask({ name: 'src', status: succeeded() })], now)).toEqual({
      action: 'generate',
    });
  });

  it('prefers the most recent source', () => {
    const a = buildTask({ name: 'a', status: succeeded({ completedAt: '2026-01-01T10:00:00Z' }) });
    const b = buildTask({ name: 'b', status: succeeded({ completedAt: '2026-01-01T11:00:00Z' }) });
    expect(planReuse(me, FP, [a, b], now)).toMatchObject({ source: { name: 'b' } });
  });

  describe('in flight', () => {
    const running = buildTask({
      name: 'run',
      created: '2026-01-01T19:00:00Z',
      status: { phase: 'Running', fingerprint: FP },
    });
    it('waits for a started duplicate', () => {
      expect(planReuse(me, FP, [running], now)).toEqual({ action: 'wait', on: 'run' });
    });
    it('fails with InFlight when the policy says so', () => {
      const failing = buildTask({ name: 'me', spec: { reuse: { onInFlight: 'Fail' } } });
      expect(planReuse(failing, FP, [running], now)).toMatchObject({ action: 'fail', on: 'run' });
    });
    it('orders pending duplicates: the first generates, the later one waits', () => {
      const first = buildTask({
        name: 'a',
        created: '2026-01-01T00:00:00Z',
        status: { phase: 'Pending', fingerprint: FP },
      });
      const second = buildTask({
        name: 'b',
        created: '2026-01-01T00:00:00Z',
        status: { phase: 'Pending', fingerprint: FP },
      });
      expect(planReuse(first, FP, [first, second], now)).toEqual({ action: 'generate' });
      expect(planReuse(second, FP, [first, second], now)).toEqual({ action: 'wait', on: 'a' });
    });
    it('reuses a finished duplicate rather than waiting', () => {
      expect(
        planReuse(me, FP, [running, buildTask({ name: 'src', status: succeeded() })], now),
      ).toMatchObject({ action: 'reuse' });
    });
  });
});
