import { describe, expect, it } from 'vitest';
import { buildEndpoint as ep, buildInput } from '../support/gateway/policies.ts';
import { CharTree, SglangRouterEmulation } from './virtual-sglang-router.ts';

function emulation(): { p: SglangRouterEmulation; texts: Map<string, string> } {
  const texts = new Map<string, string>();
  return { p: new SglangRouterEmulation((r) => texts.get(r.id) ?? ''), texts };
}

function send(
  e: ReturnType<typeof emulation>,
  loads: number[],
  id: string,
  text: string,
): string | undefined {
  e.texts.set(id, text);
  const eps = loads.map((l, i) => ep(`w${i}`, { inFlight: l }));
  const req = buildInput(id, []);
  const i = e.p.select(eps, req);
  if (i === undefined) return undefined;
  const endpoint = `w${i}`;
  e.p.observe({ kind: 'routed', endpoint, input: req });
  return endpoint;
}

describe('SglangRouterEmulation (sglang-router 0.3.2 cache_aware)', () => {
  it('no match → least in-flight, ties to the first worker (not the smallest tree)', () => {
    const e = emulation();
    expect(send(e, [0, 0], 'a', 'alpha '.repeat(100))).toBe('w0');
    expect(send(e, [0, 0], 'b', 'bravo')).toBe('w0'); // w1's tree is smaller, still w0
    expect(send(e, [1, 0], 'c', 'charlie')).toBe('w1');
  });

  it('match rate above 0.3 → the node creator, even when busier', () => {
    const e = emulation();
    send(e, [0, 0], 'a', 'x'.repeat(100));
    expect(send(e, [5, 0], 'b', `${'x'.repeat(40)}${'y'.repeat(60)}`)).toBe('w0'); // 0.4
    expect(send(e, [5, 0], 'c', `${'x'.repeat(30)}${'z'.repeat(70)}`)).toBe('w1'); // 0.3 is not above
  });

  it('imbalanced (gap > 64 and max > 1.5 min) → least loaded, and the text is inserted for it', () => {
    const e = emulation();
    send(e, [0, 0], 'a', 'q'.repeat(100));
    expect(send(e, [100, 30], 'b', 'q'.repeat(100))).toBe('w1');
    expect(send(e, [100, 70], 'c', 'q'.repeat(100))).toBe('w0'); // ratio 1.43: balanced
  });

  it('char tree: partial edge matches count; eviction keeps each tenant under the bound, LRU first', () => {
    const t = new CharTree();
    t.insert('hello world', 'w0');
    t.insert('hello there', 'w1');
    expect(t.prefixMatch('hello wx')).toEqual({ matched: 7, tenant: 'w0' });
    expect(t.prefixMatch('help')).toEqual({ matched: 3, tenant: 'w0' });
    expect(t.sizeOf('w0')).toBe(11);
    t.insert('hello moon', 'w0');
    t.evict(10); // w0 holds 'hello ' + 'world' + 'moon' = 15: the older leaf goes
    expect(t.sizeOf('w0')).toBe(10);
    expect(t.prefixMatch('hello moon').matched).toBe(10);
    expect(t.prefixMatch('hello world').matched).toBe(6);
    expect(t.sizeOf('w1')).toBe(6); // 11 > 10 too: its only leaf goes
  });
});
