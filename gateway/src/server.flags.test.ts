import { describe, expect, it } from 'vitest';
import { parseAuthFlags, parseKvIndexMaxBlocks, parseTimingFlags } from './server.ts';

describe('parseAuthFlags', () => {
  it('keys by default; with discovery tenants come from the cluster', () => {
    expect(parseAuthFlags({}, 'discovery')).toEqual({ ok: true, value: { mode: 'keys' } });
    expect(parseAuthFlags({ auth: 'open' }, 'static')).toEqual({ ok: true, value: { mode: 'open' } });
    expect(parseAuthFlags({ tenants: 't.json' }, 'static')).toEqual({
      ok: true,
      value: { mode: 'keys', tenantsFile: 't.json' },
    });
  });

  it('says which flag to change', () => {
    const error = (v: Parameters<typeof parseAuthFlags>[0], s: 'static' | 'discovery') => {
      const r = parseAuthFlags(v, s);
      return r.ok ? '' : r.error;
    };
    expect(error({ auth: 'none' }, 'discovery')).toContain('--auth: give keys');
    expect(error({}, 'static')).toContain('--auth keys with --routes needs --tenants FILE');
    expect(error({ tenants: 't.json' }, 'discovery')).toContain('with discovery, apply Tenant objects');
    expect(error({ auth: 'open', tenants: 't.json' }, 'static')).toContain('--tenants reads tenants');
  });
});

describe('parseTimingFlags', () => {
  it('defaults: a 25 s drain, /ready asked every second; 0 asks never', () => {
    expect(parseTimingFlags({})).toEqual({
      ok: true,
      value: { drainTimeoutMs: 25_000, readyPollIntervalMs: 1000 },
    });
    expect(parseTimingFlags({ 'runtime-ready-interval-ms': '0' })).toMatchObject({
      value: { readyPollIntervalMs: 0 },
    });
  });

  it.each([
    [{ 'drain-timeout-seconds': 'soon' }, '--drain-timeout-seconds: give a number of seconds'],
    [{ 'runtime-ready-interval-ms': '0.5' }, '--runtime-ready-interval-ms: give whole milliseconds'],
    [
      { 'runtime-ready-interval-ms': '-1' },
      '--runtime-ready-interval-ms: give 0 (never) or more milliseconds',
    ],
  ])('says which flag to change: %o', (values, error) => {
    expect(parseTimingFlags(values)).toEqual({ ok: false, error });
  });
});

describe('parseKvIndexMaxBlocks', () => {
  it('defaults to 4,194,304 blocks, and says what to give', () => {
    expect(parseKvIndexMaxBlocks(undefined)).toEqual({ ok: true, value: 4_194_304 });
    expect(parseKvIndexMaxBlocks('100000')).toEqual({ ok: true, value: 100_000 });
    expect(parseKvIndexMaxBlocks('10')).toEqual({
      ok: false,
      error: '--kv-index-max-blocks: give 1024 blocks or more',
    });
  });
});
