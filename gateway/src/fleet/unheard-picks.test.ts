import { describe, expect, it } from 'vitest';
import { UnheardPicks } from './unheard-picks.ts';

describe('UnheardPicks', () => {
  it("counts the peers' rate x the mean lag as the picks in transit", () => {
    const u = new UnheardPicks();
    // Fifteen a second for 10 s: 150 picks, the most recent 128 kept over 8.5 s.
    for (let i = 0; i < 150; i++) u.note(i * (1000 / 15));
    const now = 150 * (1000 / 15);
    expect(u.ratePerMs(now)).toBeCloseTo(15 / 1000, 2);
    expect(u.expected(now, 20)).toBeCloseTo(0.3, 1);
    expect(u.expected(now, 0)).toBe(0);
  });

  it('counts a slow stream over the whole window, and nothing once it has stopped', () => {
    const u = new UnheardPicks();
    for (let i = 0; i < 10; i++) u.note(i * 1000);
    expect(u.ratePerMs(10_000)).toBeCloseTo(1 / 1000, 5);
    expect(u.ratePerMs(60_000)).toBe(0);
  });
});
