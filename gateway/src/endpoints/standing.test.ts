import { describe, expect, it } from 'vitest';
import { ManualClock } from '../clock.ts';
import type { RouteEndpoint } from '../routing/table.ts';
import { StandingEndpoints } from './standing.ts';

const ep = (id: string, generation = 'g1'): RouteEndpoint => ({
  id,
  url: `http://${id}:30000`,
  role: 'standalone',
  fingerprint: 'fp',
  verified: true,
  ready: true,
  generation,
});

describe('StandingEndpoints', () => {
  it('takes a down endpoint out of every pick until the hold lapses', () => {
    const clock = new ManualClock();
    const standing = new StandingEndpoints(clock, 1000);
    const [a, b] = [ep('a'), ep('b')];
    standing.markDown(a, 'ECONNREFUSED');
    expect(standing.filter([a, b]).map((e) => e.id)).toEqual(['b']);
    expect(standing.list()).toEqual([{ id: 'a', reason: 'ECONNREFUSED', until: 1000 }]);
    clock.advance(999);
    expect(standing.isStanding(a)).toBe(false);
    clock.advance(1);
    expect(standing.isStanding(a)).toBe(true);
    expect(standing.list()).toEqual([]);
  });

  it('a new process at the same id (another generation) stands at once', () => {
    const standing = new StandingEndpoints(new ManualClock(), 60_000);
    standing.markDown(ep('a', 'ip1#0'), 'ECONNRESET');
    expect(standing.isStanding(ep('a', 'ip1#0'))).toBe(false);
    expect(standing.isStanding(ep('a', 'ip1#1'))).toBe(true);
  });

  it('when every endpoint is down, all are offered again (fail to the table, not to 503)', () => {
    const standing = new StandingEndpoints(new ManualClock(), 60_000);
    const [a, b] = [ep('a'), ep('b')];
    standing.markDown(a, 'x');
    standing.markDown(b, 'x');
    expect(standing.filter([a, b]).map((e) => e.id)).toEqual(['a', 'b']);
  });
});
