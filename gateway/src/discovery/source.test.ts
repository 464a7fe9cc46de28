import { describe, expect, it } from 'vitest';
import { parseRouteSourceFlags } from './source.ts';

describe('parseRouteSourceFlags', () => {
  it.each([
    [
      'nothing: discovery from the default kubeconfig, all namespaces',
      {},
      { kind: 'discovery', namespaces: [] },
    ],
    ['--routes: a static table', { routes: 'r.json' }, { kind: 'static', routes: 'r.json' }],
    [
      '--kubeconfig and repeated or comma-separated --namespace',
      { kubeconfig: '/k', namespace: ['a,b', ' c '] },
      { kind: 'discovery', kubeconfig: '/k', namespaces: ['a', 'b', 'c'] },
    ],
    [
      '--peers-service with the pod name and namespace: the tier from EndpointSlices',
      { 'peers-service': 'gw', 'pod-name': 'gw-0', 'pod-namespace': 'ops' },
      {
        kind: 'discovery',
        namespaces: [],
        peers: { service: 'gw', namespace: 'ops', self: 'gw-0' },
      },
    ],
  ])('%s', (_name, flags, value) => {
    expect(parseRouteSourceFlags(flags)).toEqual({ ok: true, value });
  });

  it.each([
    [
      '--routes with --kubeconfig',
      { routes: 'r.json', kubeconfig: '/k' },
      '--routes: --routes (a static table)',
    ],
    ['--routes with --namespace', { routes: 'r.json', namespace: ['a'] }, 'exclude each other'],
    ['an empty --kubeconfig', { kubeconfig: '' }, '--kubeconfig: give a file path'],
    [
      'a namespace that is not a DNS label',
      { namespace: ['Team_A'] },
      '--namespace: "Team_A" is not a namespace name',
    ],
    [
      '--peers-service with --routes',
      { routes: 'r.json', 'peers-service': 'gw', 'pod-name': 'p', 'pod-namespace': 'n' },
      '--peers-service: --peers-service reads EndpointSlices from Kubernetes',
    ],
    [
      '--peers-service without the pod name',
      { 'peers-service': 'gw', 'pod-namespace': 'n' },
      '--peers-service: --peers-service needs --pod-name and --pod-namespace',
    ],
  ])('refuses %s with a message naming the flag', (_name, flags, words) => {
    const r = parseRouteSourceFlags(flags);
    expect(r.ok).toBe(false);
    expect(r.ok ? '' : r.error).toContain(words);
  });
});
