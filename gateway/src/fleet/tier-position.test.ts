import { describe, expect, it } from 'vitest';
import type { PeerSet } from './peers.ts';
import { TierPosition } from './tier-position.ts';

const peersOf = (self: string, members: readonly string[]): PeerSet => ({ self, members: () => members });

describe('TierPosition.standing', () => {
  it('gives the rank by name and the wall-clock millisecond of the decision, read alike by the peers', () => {
    const at = (self: string) =>
      new TierPosition(peersOf(self, ['gw-b', 'gw-a', 'gw-c'])).standing(
        0.2,
        false,
        0.001,
        1_765_000_000_123.7,
      );
    expect(at('gw-c')).toEqual({
      rank: 2,
      size: 3,
      unheardMs: 0.2,
      bursty: false,
      unheardPicks: 0.001,
      instant: 1_765_000_000_123,
    });
    expect(at('gw-a')?.instant).toBe(at('gw-c')?.instant);
  });

  it('is undefined alone in the tier', () => {
    expect(new TierPosition(peersOf('gw-a', ['gw-a'])).standing(0.2, false, 0, 5)).toBeUndefined();
  });
});
