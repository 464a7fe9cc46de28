// Where the gateway finds its Redis and the key that signs reuse entries.
//
// The URL may carry a password, and a process's arguments are readable by
// every user on the node (/proc/<pid>/cmdline) and show in `ps`, in crash
// reports and in the pod spec: a URL with a password comes from a file
// (--redis-url-file, the chart mounts it from a Secret) or from the
// environment ($CACHEROUTE_REDIS_URL, e.g. a secretKeyRef), never from
// --redis-url, which is refused then and kept for URLs without one.
//
// With Redis, --reuse-hmac-key-file is required: entries are signed so that a
// writer to Redis cannot plant answers (signed-entry.ts, ADR 0024).
// --reuse-hmac-previous-key-file is accepted for reading during a rotation.

import { z } from 'zod';
import type { Parsed } from '#kube/parsed.ts';
import { MIN_HMAC_KEY_BYTES, type HmacKeys } from './signed-entry.ts';

/** The environment variable the URL may come from instead of a flag. */
export const REDIS_URL_ENV = 'CACHEROUTE_REDIS_URL';

export interface RedisFlagValues {
  readonly 'redis-url'?: string | undefined;
  readonly 'redis-url-file'?: string | undefined;
  readonly 'redis-max-entries'?: string | undefined;
  readonly 'reuse-hmac-key-file'?: string | undefined;
  readonly 'reuse-hmac-previous-key-file'?: string | undefined;
}

export interface RedisConfig {
  readonly url: string;
  readonly maxEntries: number;
  readonly hmacKeys: HmacKeys;
}

/** Reads a file's bytes; throws (with the OS's reason) when it cannot. */
export type ReadFile = (path: string) => Buffer;

const RedisUrl = z
  .string()
  .trim()
  .refine((s) => URL.canParse(s) && /^rediss?:$/.test(new URL(s).protocol), {
    error: 'give a redis:// or rediss:// URL',
  });

const MaxEntries = z.coerce
  .number({ error: 'give a number of entries' })
  .int('give a whole number of entries')
  .min(1, 'give 1 or more entries');

/** The Redis to share reuse through, or undefined without one; an error names the flag and what to change. */
export function parseRedisFlags(
  values: RedisFlagValues,
  env: Readonly<Record<string, string | undefined>>,
  readFile: ReadFile,
): Parsed<RedisConfig | undefined> {
  const url = readRedisUrl(values, env, readFile);
  if (!url.ok) return url;
  const keyFile = values['reuse-hmac-key-file'];
  const previousFile = values['reuse-hmac-previous-key-file'];
  if (url.value === undefined) {
    if (keyFile !== undefined || previousFile !== undefined)
      return fail('--reuse-hmac-key-file signs reuse entries in Redis: give the Redis URL too, or drop it');
    return { ok: true, value: undefined };
  }
  if (keyFile === undefined)
    return fail(
      'Redis reuse needs --reuse-hmac-key-file: a file of at least 32 random bytes (e.g. `openssl rand -hex 32`) ' +
        'that signs every entry, so a writer to Redis cannot plant answers (chart: gateway.redis.reuseHmac.existingSecret)',
    );
  const current = readKey('--reuse-hmac-key-file', keyFile, readFile);
  if (!current.ok) return current;
  const previous =
    previousFile === undefined
      ? undefined
      : readKey('--reuse-hmac-previous-key-file', previousFile, readFile);
  if (previous && !previous.ok) return previous;
  const maxEntries = MaxEntries.safeParse(values['redis-max-entries'] ?? '10000');
  if (!maxEntries.success)
    return fail(`--redis-max-entries: ${maxEntries.error.issues[0]?.message ?? 'invalid'}`);
  return {
    ok: true,
    value: {
      url: url.value,
      maxEntries: maxEntries.data,
      hmacKeys: { current: current.value, ...(previous ? { previous: previous.value } : {}) },
    },
  };
}

function readRedisUrl(
  values: RedisFlagValues,
  env: Readonly<Record<string, string | undefined>>,
  readFile: ReadFile,
): Parsed<string | undefined> {
  const fromEnv = env[REDIS_URL_ENV] || undefined;
  const given = [
    values['redis-url'] !== undefined && '--redis-url',
    values['redis-url-file'] !== undefined && '--redis-url-file',
    fromEnv !== undefined && `$${REDIS_URL_ENV}`,
  ].filter((g) => g !== false);
  if (given.length > 1) return fail(`${given.join(' and ')} both give the Redis URL: give it one way`);
  const file = values['redis-url-file'];
  if (file !== undefined) {
    const text = readText('--redis-url-file', file, readFile);
    return text.ok ? checkUrl('--redis-url-file', text.value) : text;
  }
  if (fromEnv !== undefined) return checkUrl(`$${REDIS_URL_ENV}`, fromEnv);
  const flag = values['redis-url'];
  if (flag === undefined) return { ok: true, value: undefined };
  const checked = checkUrl('--redis-url', flag);
  if (checked.ok && carriesPassword(checked.value ?? ''))
    return fail(
      '--redis-url: the URL carries a password, and the command line is readable by every user on the node: ' +
        `put the URL in a file for --redis-url-file (the chart mounts gateway.redis.existingSecret), or in $${REDIS_URL_ENV}`,
    );
  return checked;
}

/** A password in the user-info part, or as ioredis's `?password=` query parameter. */
export function carriesPassword(url: string): boolean {
  const u = new URL(url);
  return u.password !== '' || u.searchParams.has('password');
}

function checkUrl(source: string, raw: string): Parsed<string | undefined> {
  const r = RedisUrl.safeParse(raw);
  // Never echo the value: it may hold the password.
  return r.success
    ? { ok: true, value: r.data }
    : fail(`${source}: ${r.error.issues[0]?.message ?? 'invalid'}`);
}

function readText(flag: string, path: string, readFile: ReadFile): Parsed<string> {
  const bytes = readBytes(flag, path, readFile);
  return bytes.ok ? { ok: true, value: bytes.value.toString('utf8') } : bytes;
}

/** The file's bytes without trailing whitespace (`echo key > file` is the same key as `printf key`). */
function readKey(flag: string, path: string, readFile: ReadFile): Parsed<Uint8Array> {
  const bytes = readBytes(flag, path, readFile);
  if (!bytes.ok) return bytes;
  let end = bytes.value.byteLength;
  while (end > 0 && /\s/.test(String.fromCharCode(bytes.value[end - 1] ?? 0))) end--;
  const key = bytes.value.subarray(0, end);
  if (key.byteLength < MIN_HMAC_KEY_BYTES)
    return fail(
      `${flag}: ${path} holds ${key.byteLength} bytes; give at least ${MIN_HMAC_KEY_BYTES} random bytes ` +
        '(e.g. `openssl rand -hex 32`)',
    );
  return { ok: true, value: key };
}

function readBytes(flag: string, path: string, readFile: ReadFile): Parsed<Buffer> {
  try {
    return { ok: true, value: readFile(path) };
  } catch (err) {
    return fail(`${flag}: cannot read ${path}: ${err instanceof Error ? err.message : String(err)}`);
  }
}

function fail(error: string): { ok: false; error: string } {
  return { ok: false, error };
}
