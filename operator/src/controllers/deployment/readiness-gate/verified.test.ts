import { describe, expect, it } from 'vitest';
import type { Endpoint } from '#api';
import type { PodObject } from '../meta/pod-view.ts';
import { buildPodView } from '../meta/pod-view.ts';
import {
  LWS_GROUP_INDEX_LABEL,
  LWS_SET_NAME_LABEL,
  LWS_WORKER_INDEX_LABEL,
} from '../multi-node/leader-worker-set.ts';
import { buildConditionPatch, planVerifiedConditions, VERIFIED_CONDITION } from './verified.ts';

type Condition = { type: string; status: string; reason?: string; lastTransitionTime?: string };

function gatedPod(
  name: string,
  conditions: Condition[] = [],
  extra: Partial<PodObject['metadata']> = {},
): PodObject {
  return {
    metadata: {
      name,
      namespace: 'ns',
      uid: `uid-${name}`,
      labels: { 'cacheroute.dev/role': 'standalone' },
      ...extra,
    },
    spec: { containers: [{ name: 'sglang' }], readinessGates: [{ conditionType: VERIFIED_CONDITION }] },
    status: { phase: 'Running', podIP: '10.244.0.9', conditions: conditions as never },
  };
}

const endpoint = (pod: string, over: Partial<Endpoint> = {}): Endpoint => ({
  pod,
  ip: '10.244.0.9',
  port: 30000,
  role: 'standalone',
  ready: true,
  verified: false,
  ...over,
});

describe('planVerifiedConditions', () => {
  it('marks a verified runtime True, and leaves one that is only not up yet unwritten', () => {
    const changes = planVerifiedConditions(
      [gatedPod('a'), gatedPod('b')],
      [endpoint('a', { verified: true }), endpoint('b', { ready: false, reason: 'NotReady' })],
    );
    expect(changes).toEqual([
      { pod: 'a', condition: expect.objectContaining({ type: VERIFIED_CONDITION, status: 'True' }) },
    ]);
  });

  it('turns False with the reason when verification fails after it was True, and when the pod drains', () => {
    const wasTrue = [{ type: VERIFIED_CONDITION, status: 'True', reason: 'Verified' }];
    const changes = planVerifiedConditions(
      [gatedPod('a', wasTrue), gatedPod('b', wasTrue, { deletionTimestamp: '2026-12-05T00:00:00Z' })],
      [endpoint('a', { reason: 'IdentityMismatch', message: 'model: x' })],
    );
    expect(changes.map((c) => [c.pod, c.condition.status, c.condition.reason])).toEqual([
      ['a', 'False', 'IdentityMismatch'],
      ['b', 'False', 'Draining'],
    ]);
  });

  it('keeps a verified pod True through one failed re-verification, False at the second in a row', () => {
    const failed = endpoint('a', { reason: 'VerificationFailed', message: 'GET /server_info: timeout' });
    const conditionOf = (status: string, reason: string) => [{ type: VERIFIED_CONDITION, status, reason }];
    const [first] = planVerifiedConditions([gatedPod('a', conditionOf('True', 'Verified'))], [failed]);
    expect(first?.condition).toMatchObject({ status: 'True', reason: 'RecheckFailed' });
    expect(first?.condition.message).toContain('timeout');
    const [second] = planVerifiedConditions([gatedPod('a', conditionOf('True', 'RecheckFailed'))], [failed]);
    expect(second?.condition).toMatchObject({ status: 'False', reason: 'VerificationFailed' });
    // A success in between clears the mark: the next failure is a first one again.
    const [cleared] = planVerifiedConditions(
      [gatedPod('a', conditionOf('True', 'RecheckFailed'))],
      [endpoint('a', { verified: true })],
    );
    expect(cleared?.condition).toMatchObject({ status: 'True', reason: 'Verified' });
    // A runtime that answered with another identity is no transient failure: False at once.
    const [mismatch] = planVerifiedConditions(
      [gatedPod('a', conditionOf('True', 'Verified'))],
      [endpoint('a', { reason: 'IdentityMismatch', message: 'model: x' })],
    );
    expect(mismatch?.condition).toMatchObject({ status: 'False', reason: 'IdentityMismatch' });
  });

  it('writes a mismatch on a new pod (it says why the pod is not Ready), once', () => {
    const mismatch = endpoint('a', { reason: 'IdentityMismatch', message: 'model: x' });
    const [first] = planVerifiedConditions([gatedPod('a')], [mismatch]);
    expect(first?.condition.status).toBe('False');
    const again = planVerifiedConditions(
      [gatedPod('a', [{ type: VERIFIED_CONDITION, status: 'False', reason: 'IdentityMismatch' }])],
      [mismatch],
    );
    expect(again).toEqual([]);
  });

  it("follows a group's leader for its workers, and skips pods without the gate", () => {
    const group = (name: string, index: string): PodObject => {
      const p = gatedPod(name);
      p.metadata!.labels = {
        ...p.metadata!.labels,
        [LWS_SET_NAME_LABEL]: 'set',
        [LWS_GROUP_INDEX_LABEL]: '0',
        [LWS_WORKER_INDEX_LABEL]: index,
      };
      return p;
    };
    const ungated = { ...gatedPod('c'), spec: { containers: [{ name: 'sglang' }] } };
    const changes = planVerifiedConditions(
      [group('set-0', '0'), group('set-0-1', '1'), ungated],
      [endpoint('set-0', { verified: true }), endpoint('c', { verified: true })],
    );
    expect(changes.map((c) => [c.pod, c.condition.status])).toEqual([
      ['set-0', 'True'],
      ['set-0-1', 'True'],
    ]);
  });
});

describe('buildConditionPatch', () => {
  it('keeps the transition time while the status stays, and moves it when it changes', () => {
    const now = new Date('2026-12-05T01:00:00Z');
    const before = '2026-12-05T00:00:00Z';
    const pod = gatedPod('a', [
      { type: VERIFIED_CONDITION, status: 'False', reason: 'NotVerified', lastTransitionTime: before },
    ]);
    const same = buildConditionPatch(
      pod,
      { type: VERIFIED_CONDITION, status: 'False', reason: 'X', message: '' },
      now,
    );
    const flip = buildConditionPatch(
      pod,
      { type: VERIFIED_CONDITION, status: 'True', reason: 'Verified', message: '' },
      now,
    );
    expect(JSON.stringify(same)).toContain(before);
    expect(JSON.stringify(flip)).toContain(now.toISOString());
  });
});

describe('buildPodView with the gate', () => {
  it('reads a gated pod as ready from ContainersReady, while Ready waits for the gate', () => {
    const pod = gatedPod('a', [
      { type: 'ContainersReady', status: 'True' },
      { type: 'Ready', status: 'False', reason: 'ReadinessGatesNotReady' },
    ]);
    expect(buildPodView(pod)?.ready).toBe(true);
  });
});
