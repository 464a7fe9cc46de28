import { describe, expect, it } from 'vitest';
import type { DeploymentPartResource } from '#api';
import type { PodObject } from '../deployment/meta/pod-view.ts';
import { computePartStatus, formatSelector } from './status.ts';

const part: DeploymentPartResource = {
  apiVersion: 'cacheroute.dev/v1alpha1',
  kind: 'DeploymentPart',
  metadata: { name: 'chat-prefill', namespace: 'ns', generation: 4 },
  spec: { deployment: 'chat', part: 'prefill', replicas: 3 },
};

function pod(name: string, role: string, o: { ready?: boolean; terminating?: boolean } = {}): PodObject {
  return {
    metadata: {
      name,
      labels: { 'cacheroute.dev/deployment': 'chat', 'cacheroute.dev/role': role },
      ...(o.terminating ? { deletionTimestamp: '2026-12-02T20:00:00Z' } : {}),
    },
    status: {
      phase: 'Running',
      conditions: [{ type: 'Ready', status: o.ready ? 'True' : 'False' }],
    },
  };
}

describe('computePartStatus', () => {
  it('counts the pods of its own part only, terminating ones not, and says which are Ready', () => {
    const pods = [
      pod('p-0', 'prefill', { ready: true }),
      pod('p-1', 'prefill'),
      pod('p-2', 'prefill', { ready: true, terminating: true }),
      pod('d-0', 'decode', { ready: true }),
    ];
    expect(computePartStatus(part, pods)).toEqual({
      observedGeneration: 4,
      replicas: 2,
      readyReplicas: 1,
      selector: 'cacheroute.dev/deployment=chat,cacheroute.dev/role=prefill',
    });
  });

  it('always carries a selector: an HPA refuses a scale target without one', () => {
    expect(computePartStatus(part, []).selector).toBe(
      'cacheroute.dev/deployment=chat,cacheroute.dev/role=prefill',
    );
  });
});

describe('formatSelector', () => {
  it('joins labels as the scale subresource carries them', () => {
    expect(formatSelector({ a: 'b', c: 'd' })).toBe('a=b,c=d');
  });
});
