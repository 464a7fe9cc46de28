import { describe, expect, it } from 'vitest';
import { computeServingMembers } from './peer-slices.ts';

const endpoint = (name: string, conditions: Record<string, boolean | null> = {}) => ({
  addresses: [`10.0.0.${name.length}`],
  conditions,
  targetRef: { kind: 'Pod', name },
});

describe('computeServingMembers', () => {
  it('counts ready, not terminating endpoints of every slice, by pod name, sorted, once', () => {
    const slices = [
      { endpoints: [endpoint('gw-b', { ready: true }), endpoint('gw-a', { ready: null })] },
      {
        endpoints: [
          endpoint('gw-c', { ready: false }),
          endpoint('gw-d', { ready: true, terminating: true }),
          endpoint('gw-a', { ready: true }),
        ],
      },
    ];
    expect(computeServingMembers(slices)).toEqual(['gw-a', 'gw-b']);
  });

  it('falls back to the address without a target, and skips an empty or malformed slice', () => {
    expect(
      computeServingMembers([
        { endpoints: [{ addresses: ['10.0.0.9'] }] },
        { endpoints: null },
        { endpoints: 3 },
      ]),
    ).toEqual(['10.0.0.9']);
  });
});
