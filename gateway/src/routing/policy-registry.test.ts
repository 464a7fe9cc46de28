import { describe, expect, it } from 'vitest';
import { Admission, ResultReuse, RoutingSettings } from '#api';
import type { ModelRoute } from './table.ts';
import { PolicyRegistry } from './policy-registry.ts';

const route = (policy: string, endpoints: string[]): ModelRoute => ({
  model: 'm',
  deployment: 'ns/m',
  fingerprint: 'fp',
  salt: 's',
  routing: RoutingSettings.parse({ policy }),
  admission: Admission.parse({}),
  reuse: ResultReuse.parse({}),
  endpoints: endpoints.map((id) => ({
    id,
    url: `http://${id}`,
    role: 'standalone',
    fingerprint: 'fp',
    verified: true,
    ready: true,
  })),
});

describe('PolicyRegistry', () => {
  it('keeps a policy while its settings hold, tells it of new endpoints, and rebuilds it when they change', () => {
    const registry = new PolicyRegistry();
    const views: string[][] = [];
    const view = (e: ModelRoute['endpoints'][number]) => ({
      id: e.id,
      inFlight: 0,
      queued: 0,
      generation: '',
    });
    const first = route('cache-aware', ['a']);
    const p = registry.policyFor(first, view);
    const observed = p.syncEndpoints?.bind(p);
    p.syncEndpoints = (v) => {
      views.push(v.map((x) => x.id));
      observed?.(v);
    };
    expect(registry.policyFor(first, view)).toBe(p);
    expect(views).toEqual([]); // the same route object: nothing to sync
    expect(registry.policyFor(route('cache-aware', ['a', 'b']), view)).toBe(p);
    expect(views).toEqual([['a', 'b']]);
    const rebuilt = registry.policyFor(route('round-robin', ['a', 'b']), view);
    expect(rebuilt).not.toBe(p);
    expect(rebuilt.name).toBe('round-robin');
    expect(registry.policyOf('ns/m')).toBe(rebuilt);
  });
});
