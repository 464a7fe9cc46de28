// Reuse entries in Redis carry an HMAC-SHA256, so whoever can write to Redis
// without the tier's key cannot plant an answer the gateway serves.
//
// Stored form: `cr1.<expires at, ms since the epoch>.<mac, base64url>.<json>`.
// The MAC covers the version, the expiry, the full Redis key the entry is
// stored under and the JSON: an entry moved to another key (another request,
// another tenant's salt) or kept past its expiry with PEXPIRE/PERSIST is
// refused, not only one whose bytes were changed. Verification compares in
// constant time (timingSafeEqual). A previous key, when given, is accepted for
// reading (rotation, ADR 0024); entries are always signed with the current one.
//
// Pure: the caller passes the wall-clock time (replicas compare expiries across
// hosts: a skew of seconds moves an expiry by as much, never more).

import { createHmac, timingSafeEqual } from 'node:crypto';

const VERSION = 'cr1';
const MAC_BYTES = 32;
/** base64url of 32 bytes, without padding. */
const MAC_CHARS = 43;
/** What the shortest sensible key holds: 256 bits. */
export const MIN_HMAC_KEY_BYTES = 32;
/** `cr1.` + 13-16 digits + `.` + mac + `.`: bytes the envelope adds to the JSON, at most. */
export const ENVELOPE_MAX_BYTES = VERSION.length + 1 + 16 + 1 + MAC_CHARS + 1;

export interface HmacKeys {
  /** Signs every entry written, and verifies. */
  readonly current: Uint8Array;
  /** Verifies only: entries the tier signed before the current key was rolled out. */
  readonly previous?: Uint8Array | undefined;
}

/** Why an entry read from Redis was not served. */
export type RefusalReason = 'malformed' | 'signature' | 'expired';

export type Opened =
  { readonly ok: true; readonly json: string } | { readonly ok: false; readonly reason: RefusalReason };

export class EntrySigner {
  readonly #keys: readonly Uint8Array[];

  constructor(keys: HmacKeys) {
    for (const k of [keys.current, keys.previous])
      if (k !== undefined && k.byteLength < MIN_HMAC_KEY_BYTES)
        throw new RangeError(`an HMAC key needs at least ${MIN_HMAC_KEY_BYTES} bytes`);
    this.#keys = keys.previous ? [keys.current, keys.previous] : [keys.current];
  }

  /** The stored form of `json` under `redisKey`, valid until `expiresAtMs`. */
  seal(redisKey: string, json: string, expiresAtMs: number): string {
    const expires = String(Math.round(expiresAtMs));
    const mac = this.#mac(this.#keys[0] as Uint8Array, expires, redisKey, json).toString('base64url');
    return `${VERSION}.${expires}.${mac}.${json}`;
  }

  /** The JSON of an entry read from `redisKey`, when one of our keys signed it for that key and it has not expired. */
  open(redisKey: string, stored: string, nowMs: number): Opened {
    const parts = splitEnvelope(stored);
    if (!parts) return { ok: false, reason: 'malformed' };
    const given = Buffer.from(parts.mac, 'base64url');
    if (given.byteLength !== MAC_BYTES) return { ok: false, reason: 'malformed' };
    const signed = this.#keys.some((k) =>
      timingSafeEqual(this.#mac(k, parts.expires, redisKey, parts.json), given),
    );
    if (!signed) return { ok: false, reason: 'signature' };
    if (Number(parts.expires) <= nowMs) return { ok: false, reason: 'expired' };
    return { ok: true, json: parts.json };
  }

  #mac(key: Uint8Array, expires: string, redisKey: string, json: string): Buffer {
    // Length-prefixed fields: no two (key, json) pairs hash the same bytes.
    return createHmac('sha256', key)
      .update(`${VERSION}\0${expires}\0${Buffer.byteLength(redisKey)}\0${redisKey}\0`)
      .update(json)
      .digest();
  }
}

function splitEnvelope(
  stored: string,
): { readonly expires: string; readonly mac: string; readonly json: string } | undefined {
  if (!stored.startsWith(`${VERSION}.`)) return undefined;
  const expiresEnd = stored.indexOf('.', VERSION.length + 1);
  if (expiresEnd < 0) return undefined;
  const expires = stored.slice(VERSION.length + 1, expiresEnd);
  if (!/^\d{1,16}$/.test(expires)) return undefined;
  const macEnd = expiresEnd + 1 + MAC_CHARS;
  if (stored[macEnd] !== '.') return undefined;
  return { expires, mac: stored.slice(expiresEnd + 1, macEnd), json: stored.slice(macEnd + 1) };
}
