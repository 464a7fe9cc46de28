import { describe, expect, it } from 'vitest';
import type { PodObject } from '../meta/pod-view.ts';
import { buildEndpointViews, isGroupWorker } from './groups.ts';

function pod(
  name: string,
  opts: { worker?: string; group?: string; ready?: boolean; lws?: boolean } = {},
): PodObject {
  const lws = opts.lws ?? true;
  return {
    metadata: {
      name,
      uid: `uid-${name}`,
      labels: {
        'cacheroute.dev/role': 'standalone',
        'cacheroute.dev/fingerprint': 'fp',
        ...(lws
          ? {
              'leaderworkerset.sigs.k8s.io/name': 'mn-sglang',
              'leaderworkerset.sigs.k8s.io/group-index': opts.group ?? '0',
              'leaderworkerset.sigs.k8s.io/worker-index': opts.worker ?? '0',
            }
          : {}),
      },
      annotations: lws ? { 'leaderworkerset.sigs.k8s.io/size': '3' } : {},
    },
    status: {
      phase: 'Running',
      podIP: '10.244.0.1',
      conditions: [{ type: 'Ready', status: opts.ready === false ? 'False' : 'True' }],
    },
  };
}

describe('buildEndpointViews', () => {
  it('makes one endpoint per group, its leader, ready while all its workers are', () => {
    const views = buildEndpointViews([
      pod('mn-sglang-0'),
      pod('mn-sglang-0-1', { worker: '1' }),
      pod('mn-sglang-0-2', { worker: '2' }),
      pod('mn-sglang-1', { group: '1' }),
      pod('mn-sglang-1-1', { group: '1', worker: '1' }),
      pod('mn-sglang-1-2', { group: '1', worker: '2', ready: false }),
    ]);
    expect(views.map((v) => [v.name, v.ready])).toEqual([
      ['mn-sglang-0', true],
      ['mn-sglang-1', false],
    ]);
  });

  it('holds a leader not ready while its group is short of workers', () => {
    const views = buildEndpointViews([pod('mn-sglang-0'), pod('mn-sglang-0-1', { worker: '1' })]);
    expect(views.map((v) => v.ready)).toEqual([false]);
  });

  it('leaves pods outside any group as they are', () => {
    const plain = pod('dense-abc', { lws: false });
    expect(isGroupWorker(plain)).toBe(false);
    expect(buildEndpointViews([plain]).map((v) => [v.name, v.ready])).toEqual([['dense-abc', true]]);
  });
});
