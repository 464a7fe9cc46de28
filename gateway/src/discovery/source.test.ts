import { describe, expect, it } from 'vitest';
import { parseRouteSourceFlags } from './source.ts';

describe('parseRouteSourceFlags', () => {
  const KEYS = { namespace: 'ops', name: 'gateway-keys' };
  it.each([
    [
      '--keys-secret NAMESPACE/NAME: discovery from the default kubeconfig, all namespaces',
      { 'keys-secret': 'ops/gateway-keys' },
      { kind: 'discovery', namespaces: [], keysSecret: KEYS },
    ],
    ['--routes: a static table', { routes: 'r.json' }, { kind: 'static', routes: 'r.json' }],
    [
      '--kubeconfig and repeated or comma-separated --namespace',
      { kubeconfig: '/k', namespace: ['a,b', ' c '], 'keys-secret': 'ops/gateway-keys' },
      { kind: 'discovery', kubeconfig: '/k', namespaces: ['a', 'b', 'c'], keysSecret: KEYS },
    ],
    [
      '--peers-service with the pod name and namespace; --keys-secret NAME in the pod namespace',
      { 'peers-service': 'gw', 'pod-name': 'gw-0', 'pod-namespace': 'ops', 'keys-secret': 'gateway-keys' },
      {
        kind: 'discovery',
        namespaces: [],
        keysSecret: KEYS,
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
      'discovery without --keys-secret',
      {},
      "--keys-secret: required with discovery: the Secret the operator keeps for the gateway (the operator's --gateway-keys-secret)",
    ],
    [
      'a bare --keys-secret name without a pod namespace',
      { 'keys-secret': 'k' },
      '--keys-secret: "k": give namespace/name',
    ],
    [
      '--keys-secret with --routes',
      { routes: 'r.json', 'keys-secret': 'a/b' },
      'it needs discovery, not --routes',
    ],
    [
      '--peers-service without the pod name',
      { 'peers-service': 'gw', 'pod-namespace': 'n', 'keys-secret': 'k' },
      '--peers-service: --peers-service needs --pod-name and --pod-namespace',
    ],
  ])('refuses %s with a message naming the flag', (_name, flags, words) => {
    const r = parseRouteSourceFlags(flags);
    expect(r.ok).toBe(false);
    expect(r.ok ? '' : r.error).toContain(words);
  });
});
