import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../../test/support/manual-clock.ts';
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

describe('StandingEndpoints: draining (the runtime says /ready 503)', () => {
  it('leaves every pick until /ready answers 200 again, however long that takes', () => {
    const clock = new ManualClock();
    const standing = new StandingEndpoints(clock, 1000);
    const [a, b] = [ep('a'), ep('b')];
    standing.markDraining(a);
    expect(standing.filter([a, b]).map((e) => e.id)).toEqual(['b']);
    expect(standing.list()).toEqual([{ id: 'a', reason: 'draining' }]);
    clock.advance(3_600_000);
    expect(standing.isStanding(a)).toBe(false);
    standing.markReady(a);
    expect(standing.isStanding(a)).toBe(true);
    expect(standing.list()).toEqual([]);
  });

  it('a new process at the same id (another generation) stands at once', () => {
    const standing = new StandingEndpoints(new ManualClock());
    standing.markDraining(ep('a', 'ip1#0'));
    expect(standing.isStanding(ep('a', 'ip1#1'))).toBe(true);
    expect(standing.list()).toEqual([]);
  });

  it('a 503 of the old process does not mark the new one', () => {
    const standing = new StandingEndpoints(new ManualClock());
    const [old, next] = [ep('a', 'ip1#0'), ep('a', 'ip1#1')];
    expect(standing.isStanding(next)).toBe(true);
    standing.markDraining(old); // asked while the table still showed the old process
    expect(standing.isStanding(next)).toBe(true);
  });

  it('a connection failure shows before draining and its hold still runs after a 200', () => {
    const clock = new ManualClock();
    const standing = new StandingEndpoints(clock, 1000);
    const a = ep('a');
    standing.markDraining(a);
    standing.markDown(a, 'ECONNREFUSED');
    expect(standing.list()).toEqual([{ id: 'a', reason: 'ECONNREFUSED', until: 1000 }]);
    clock.advance(1000);
    expect(standing.list()).toEqual([{ id: 'a', reason: 'draining' }]);
    expect(standing.isStanding(a)).toBe(false);
    standing.markDown(a, 'ECONNRESET');
    standing.markReady(a);
    expect(standing.isStanding(a)).toBe(false);
    expect(standing.list()).toEqual([{ id: 'a', reason: 'ECONNRESET', until: 2000 }]);
    clock.advance(1000);
    expect(standing.isStanding(a)).toBe(true);
  });

  it.each([
    [
      'every endpoint draining: all of them (a draining runtime still serves)',
      ['draining', 'draining'],
      ['a', 'b'],
    ],
    ['draining and refused, none standing: the draining one', ['draining', 'down'], ['a']],
    ["draining and refused both, the other refused: all (the table's word)", ['both', 'down'], ['a', 'b']],
    ['one standing: only it', ['draining', 'none'], ['b']],
  ])('%s', (_name, marks, picked) => {
    const standing = new StandingEndpoints(new ManualClock(), 60_000);
    const endpoints = [ep('a'), ep('b')];
    endpoints.forEach((e, i) => {
      const mark = marks[i];
      if (mark === 'draining' || mark === 'both') standing.markDraining(e);
      if (mark === 'down' || mark === 'both') standing.markDown(e, 'ECONNREFUSED');
    });
    expect(standing.filter(endpoints).map((e) => e.id)).toEqual(picked);
  });

  it('forgets the endpoints no route lists any more', () => {
    const standing = new StandingEndpoints(new ManualClock(), 60_000);
    standing.markDraining(ep('a'));
    standing.markDown(ep('b'), 'ECONNREFUSED');
    standing.markDraining(ep('c'));
    standing.keepOnly(new Set(['c']));
    expect(standing.list().map((m) => m.id)).toEqual(['c']);
  });
});
