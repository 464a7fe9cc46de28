import { describe, expect, it } from 'vitest';
import {
  describeKvEvents,
  offsetEndpointPort,
  parseKvEventsConfig,
  parseTcpEndpoint,
  resolveLoadRange,
  shouldBind,
  type KvEventsConfig,
} from './kv-events-config.ts';

function config(json: Record<string, unknown>): KvEventsConfig {
  const parsed = parseKvEventsConfig(JSON.stringify(json));
  if (!parsed.ok) throw new Error(parsed.error);
  return parsed.value;
}

describe('--kv-events-config', () => {
  it("takes KVEventsConfig's defaults and ignores unknown keys", () => {
    expect(config({ publisher: 'zmq', dynamo_extra: 1 })).toEqual({
      publisher: 'zmq',
      endpoint: 'tcp://*:5557',
      bind: null,
      replay_endpoint: null,
      buffer_steps: 10_000,
      hwm: 100_000,
      max_queue_size: 100_000,
      topic: '',
      format: 'default',
    });
  });

  it.each([
    ['not JSON', '{publisher'],
    ['a wrong type', '{"buffer_steps": "many"}'],
    ['an unknown format', '{"format": "vllm"}'],
  ])('refuses %s', (_name, raw) => {
    expect(parseKvEventsConfig(raw).ok).toBe(false);
  });

  it.each([
    ['tcp://*:5557', null, true],
    ['tcp://0.0.0.0:5557', null, true],
    ['tcp://[::]:5557', null, true],
    ['ipc:///tmp/kv', null, true],
    ['tcp://127.0.0.1:5557', null, false],
    ['tcp://127.0.0.1:5557', true, true],
    ['tcp://*:5557', false, false],
  ])('%s with bind %s binds: %s', (endpoint, bind, want) => {
    expect(shouldBind(config({ endpoint, bind }), endpoint)).toBe(want);
  });

  it('offsets a DP rank by its number', () => {
    expect(offsetEndpointPort('tcp://*:5557', 0)).toBe('tcp://*:5557');
    expect(offsetEndpointPort('tcp://*:5557', 3)).toBe('tcp://*:5560');
    expect(offsetEndpointPort('inproc://cache', 2)).toBe('inproc://cache_dp2');
  });

  it.each([
    ['tcp://*:5557', { host: '*', port: 5557, isIpv6: false }],
    ['tcp://[::1]:5557', { host: '::1', port: 5557, isIpv6: true }],
    ['tcp://::1:5557', null],
    ['tcp://host', null],
    ['tcp://host:0', null],
    ['tcp://host:70000', null],
    ['ipc:///tmp/kv', null],
  ])('parses %s', (endpoint, want) => {
    expect(parseTcpEndpoint(endpoint)).toEqual(want);
  });
});

describe('--load-publish-endpoint', () => {
  const kv = config({ publisher: 'zmq', endpoint: 'tcp://*:5557', replay_endpoint: 'tcp://*:5558' });
  it.each([
    ['unset', null, 1, null],
    ['off', 'off', 1, null],
    ['auto, packed after the replay port it would overlap', 'auto', 1, { host: '*', base: 5559 }],
    ['auto with 4 ranks, after the replay range', 'auto', 4, { host: '*', base: 5562 }],
    ['an explicit wildcard address', 'tcp://*:6000', 1, { host: '*', base: 6000 }],
  ])('%s', (_name, mode, dp, want) => {
    expect(resolveLoadRange(kv, dp, mode)).toEqual({ range: want, reason: null });
  });

  it.each([
    ['auto without a wildcard KV endpoint', config({ endpoint: 'tcp://10.0.0.1:5557' }), 'auto'],
    ['a concrete host', kv, 'tcp://10.0.0.1:6000'],
    ['an overlap with the KV range', kv, 'tcp://*:5557'],
    ['no KV endpoint', null, 'tcp://*:6000'],
  ])('refuses %s', (_name, cfg, mode) => {
    const r = resolveLoadRange(cfg, 1, mode);
    expect(r.range).toBeNull();
    expect(r.reason).toMatch(/load-publish-endpoint|overlaps/);
  });
});

describe("/server_info's kv_events", () => {
  const opts = { pageSize: 16, dpSize: 2, loadPublishEndpoint: null };
  it('describes an active publisher with its replay port (describe_kv_events_publisher)', () => {
    const cfg = config({
      publisher: 'zmq',
      endpoint: 'tcp://*:5557',
      replay_endpoint: 'tcp://*:5558',
      topic: 'kv',
    });
    expect(describeKvEvents(cfg, opts)).toEqual({
      publisher: 'zmq',
      endpoint_host: '*',
      endpoint_port_base: 5557,
      topic: 'kv',
      block_size: 16,
      dp_size: 2,
      replay_endpoint_port_base: 5558,
    });
    expect(describeKvEvents(cfg, { ...opts, loadPublishEndpoint: 'auto' })).toMatchObject({
      load_endpoint_port_base: 5560,
      load_topic: 'load',
    });
  });

  it('brackets an IPv6 host', () => {
    expect(describeKvEvents(config({ publisher: 'zmq', endpoint: 'tcp://[::]:5557' }), opts)).toMatchObject({
      endpoint_host: '[::]',
    });
  });

  it.each([
    ['no config', null],
    ['the null publisher', config({})],
    ['an ipc endpoint', config({ publisher: 'zmq', endpoint: 'ipc:///tmp/kv' })],
  ])('is null with %s', (_name, cfg) => {
    expect(describeKvEvents(cfg, opts)).toBeNull();
  });
});
