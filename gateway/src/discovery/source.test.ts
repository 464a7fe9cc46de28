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
  ])('refuses %s with a message naming the flag', (_name, flags, words) => {
    const r = parseRouteSourceFlags(flags);
    expect(r.ok).toBe(false);
    expect(r.ok ? '' : r.error).toContain(words);
  });
});
