import { describe, expect, it } from 'vitest';
import { carriesPassword, parseRedisFlags, type RedisFlagValues } from './redis-flags.ts';

const KEY = 'k'.repeat(64);
const files: Record<string, string> = {
  '/s/url': 'redis://:s3cret@redis:6379/0\n',
  '/s/plain-url': 'redis://redis:6379',
  '/s/key': `${KEY}\n`,
  '/s/old-key': 'o'.repeat(32),
  '/s/short-key': 'short\n',
  '/s/bad-url': 'http://redis:6379',
};
const readFile = (path: string): Buffer => {
  const text = files[path];
  if (text === undefined) throw new Error(`ENOENT: no such file or directory, open '${path}'`);
  return Buffer.from(text);
};
const parse = (values: RedisFlagValues, env: Record<string, string> = {}) =>
  parseRedisFlags(values, env, readFile);
const errorOf = (values: RedisFlagValues, env: Record<string, string> = {}): string => {
  const r = parse(values, env);
  return r.ok ? '' : r.error;
};

describe('parseRedisFlags', () => {
  it('no Redis without a URL', () => {
    expect(parse({})).toEqual({ ok: true, value: undefined });
  });

  it('reads the URL (with its password) from --redis-url-file, and the key from --reuse-hmac-key-file', () => {
    expect(parse({ 'redis-url-file': '/s/url', 'reuse-hmac-key-file': '/s/key' })).toEqual({
      ok: true,
      value: {
        url: 'redis://:s3cret@redis:6379/0',
        maxEntries: 10_000,
        hmacKeys: { current: Buffer.from(KEY) },
      },
    });
  });

  it('reads the URL from $CACHEROUTE_REDIS_URL, and a previous key for a rotation', () => {
    const r = parse(
      {
        'reuse-hmac-key-file': '/s/key',
        'reuse-hmac-previous-key-file': '/s/old-key',
        'redis-max-entries': '50',
      },
      { CACHEROUTE_REDIS_URL: 'rediss://user:pw@redis:6380' },
    );
    expect(r).toEqual({
      ok: true,
      value: {
        url: 'rediss://user:pw@redis:6380',
        maxEntries: 50,
        hmacKeys: { current: Buffer.from(KEY), previous: Buffer.from('o'.repeat(32)) },
      },
    });
  });

  it('takes --redis-url on the command line only without a password', () => {
    expect(parse({ 'redis-url': 'redis://redis:6379', 'reuse-hmac-key-file': '/s/key' })).toMatchObject({
      ok: true,
      value: { url: 'redis://redis:6379' },
    });
    for (const url of [
      'redis://:s3cret@redis:6379',
      'redis://u:s3cret@redis',
      'redis://redis?password=s3cret',
    ]) {
      const error = errorOf({ 'redis-url': url, 'reuse-hmac-key-file': '/s/key' });
      expect(error).toContain('--redis-url: the URL carries a password');
      expect(error).toContain('--redis-url-file');
      expect(error).toContain('$CACHEROUTE_REDIS_URL');
      expect(error).not.toContain('s3cret');
    }
  });

  it('requires the HMAC key with Redis, and says how to make one', () => {
    const error = errorOf({ 'redis-url-file': '/s/url' });
    expect(error).toContain('Redis reuse needs --reuse-hmac-key-file');
    expect(error).toContain('openssl rand -hex 32');
  });

  it.each([
    [
      { 'redis-url': 'redis://a', 'redis-url-file': '/s/url' },
      {},
      '--redis-url and --redis-url-file both give',
    ],
    [{ 'redis-url-file': '/s/url' }, { CACHEROUTE_REDIS_URL: 'redis://a' }, 'give it one way'],
    [
      { 'redis-url-file': '/s/missing', 'reuse-hmac-key-file': '/s/key' },
      {},
      '--redis-url-file: cannot read /s/missing',
    ],
    [
      { 'redis-url-file': '/s/bad-url', 'reuse-hmac-key-file': '/s/key' },
      {},
      '--redis-url-file: give a redis:// or rediss:// URL',
    ],
    [
      { 'redis-url-file': '/s/url', 'reuse-hmac-key-file': '/s/short-key' },
      {},
      '--reuse-hmac-key-file: /s/short-key holds 5 bytes; give at least 32',
    ],
    [
      {
        'redis-url-file': '/s/url',
        'reuse-hmac-key-file': '/s/key',
        'reuse-hmac-previous-key-file': '/s/nope',
      },
      {},
      '--reuse-hmac-previous-key-file: cannot read /s/nope',
    ],
    [{ 'reuse-hmac-key-file': '/s/key' }, {}, 'give the Redis URL too'],
    [
      { 'redis-url-file': '/s/url', 'reuse-hmac-key-file': '/s/key', 'redis-max-entries': '0' },
      {},
      '--redis-max-entries: give 1 or more',
    ],
  ] as const)('says what to change: %o %o', (values, env, message) => {
    expect(errorOf(values, env)).toContain(message);
  });

  it('never echoes a URL it refuses (it may hold the password)', () => {
    expect(errorOf({}, { CACHEROUTE_REDIS_URL: 'http://:s3cret@redis' })).not.toContain('s3cret');
  });
});

describe('carriesPassword', () => {
  it.each([
    ['redis://redis:6379', false],
    ['redis://user@redis:6379', false],
    ['redis://:pw@redis:6379', true],
    ['rediss://user:pw@redis:6379/1', true],
    ['redis://redis:6379?password=pw', true],
  ])('%s → %s', (url, expected) => {
    expect(carriesPassword(url)).toBe(expected);
  });
});
