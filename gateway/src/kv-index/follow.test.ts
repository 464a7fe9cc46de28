import { afterEach, describe, expect, it } from 'vitest';
import { Publisher } from 'zeromq';
import { monotonicClock } from '#kube/clock.ts';
import { buildTestEndpoint, buildTestRoute } from '../../../test/support/gateway/routes.ts';
import { reachableOnLoopback } from '../../../test/support/sim/testing.ts';
import { StaticRoutingTable } from '../routing/table.ts';
import { KvIndexFleet } from './fleet.ts';
import { KvPublisherFollower } from './follow.ts';

let fleet: KvIndexFleet | undefined;
let publisher: Publisher | undefined;
afterEach(async () => {
  await fleet?.close();
  fleet = undefined;
  publisher?.close();
  publisher = undefined;
});

describe('KvPublisherFollower', () => {
  it("models a route's shared L3 tier only while the route says it is reachable", async () => {
    const p = new Publisher({ linger: 0 });
    publisher = p;
    await p.bind('tcp://127.0.0.1:0');
    const events = { kv: [reachableOnLoopback(p.lastEndpoint) ?? ''], topic: 'kv', blockSize: 16 };
    const endpoints = [buildTestEndpoint('a', 'http://127.0.0.1:1', { generation: 'g', events })];
    const withL3 = buildTestRoute(endpoints, {}, { l3Roles: ['standalone'] });
    const without = buildTestRoute(endpoints);
    const f = new KvIndexFleet();
    fleet = f;
    const follower = new KvPublisherFollower(new StaticRoutingTable([withL3]), f, monotonicClock);
    follower.followRoute(withL3);
    expect(f.l3.units).toBe(1);
    follower.followRoute(without);
    expect(f.l3.units).toBe(0);
  });
});
