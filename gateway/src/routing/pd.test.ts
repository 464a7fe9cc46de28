import { describe, expect, it } from 'vitest';
import { Admission, ResultReuse, RoutingSettings } from '#api';
import {
  buildPairBootstrap,
  buildPdBody,
  computeBootstrapRoom,
  computeDecodePartners,
  isDisaggregated,
} from './pd.ts';
import type { ModelRoute, RouteEndpoint } from './table.ts';

const ep = (id: string, over: Partial<RouteEndpoint>): RouteEndpoint => ({
  id,
  url: `http://10.0.0.${id.length}:30000`,
  role: 'standalone',
  fingerprint: 'fp1',
  verified: true,
  ready: true,
  ...over,
});

const route = (endpoints: RouteEndpoint[]): ModelRoute => ({
  model: 'm',
  deployment: 'ns/m',
  fingerprint: 'fp1',
  salt: 's',
  routing: RoutingSettings.parse({}),
  admission: Admission.parse({}),
  reuse: ResultReuse.parse({}),
  endpoints,
});

describe('prefill/decode pairing', () => {
  it('pairs only decodes of the same fingerprint that are ready and verified', () => {
    const prefill = ep('p', { role: 'prefill', bootstrapPort: 9000 });
    const r = route([
      prefill,
      ep('d-same', { role: 'decode' }),
      ep('d-old', { role: 'decode', fingerprint: 'fp0' }),
      ep('d-unverified', { role: 'decode', verified: false }),
      ep('d-unready', { role: 'decode', ready: false }),
    ]);
    expect(isDisaggregated(r)).toBe(true);
    expect(computeDecodePartners(r, prefill).map((e) => e.id)).toEqual(['d-same']);
  });

  it('stamps bootstrap host, port and room', () => {
    const prefill = ep('p', { role: 'prefill', url: 'http://10.1.2.3:30000', bootstrapPort: 9000 });
    expect(buildPdBody({ text: 'hi' }, buildPairBootstrap(prefill, 7))).toEqual({
      text: 'hi',
      bootstrap_host: '10.1.2.3',
      bootstrap_port: 9000,
      bootstrap_room: 7,
    });
    expect(buildPdBody({}, buildPairBootstrap(ep('p', { role: 'prefill' }), 1))['bootstrap_port']).toBe(8998);
  });

  it('rooms are safe integers', () => {
    const room = computeBootstrapRoom(() => 0xffffffff);
    expect(Number.isSafeInteger(room)).toBe(true);
    expect(room).toBe(2 ** 53 - 1);
  });

  it('a standalone route is not disaggregated', () => {
    expect(isDisaggregated(route([ep('a', {})]))).toBe(false);
  });
});
