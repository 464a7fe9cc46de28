// The common KV event batch read straight off the msgpack bytes: what
// decode.ts's general path gives for it, at a fraction of the cost. A 220 KB
// prompt's BlockStored carries ~45,000 token ids and ~2,800 hashes; the
// general decoder walks each through its state machine (a state object an
// array, a switch an element), which cost ~2 ms a batch, as much as storing
// the blocks.
//
// Only the shape SGLang publishes is read here: a batch array of 2 or 3, a
// float or integer timestamp, event maps with the keys decode.ts reads (and
// SGLang's string-valued session_id and lora_name, skipped), no other key,
// each at most once. Anything else (an unknown key, a value of
// another kind, a malformed byte, bytes left over) gives null, and decode.ts
// decodes the payload the general way, with its own answer and errors: this
// reader only ever agrees with it or declines (decode-fast.test.ts holds it to
// that).

import type { KvCacheEvent, StorageMedium } from '#sglang/kv-events.ts';
import type { KvEventBatch } from './decode.ts';

const INT64_MAX = 2n ** 63n - 1n;
const MEDIA: ReadonlySet<string> = new Set(['GPU', 'CPU_PINNED', 'DISK', 'EXTERNAL']);

/** Thrown to decline; caught in readFastBatch only (one instance: no stack captured a throw). */
const DECLINE = new Error('not the usual batch shape');

/** One decoder for every batch (a native object: not one a batch). */
const TEXT = new TextDecoder('utf-8', { fatal: true });

/**
 * Short ASCII strings already read: every event repeats the same few (its keys, its type, the
 * medium, a route's salt), so bytes equal to one give that string, neither a view nor a decode
 * (they were most of a batch's garbage after the ids and hashes). The first ones seen are kept.
 */
const KNOWN_MAX = 64;
const KNOWN_MAX_LENGTH = 64;
const known: string[] = [];

function knownString(bytes: Uint8Array, at: number, n: number): string | undefined {
  next: for (const s of known) {
    if (s.length !== n) continue;
    for (let i = 0; i < n; i++) if (s.charCodeAt(i) !== bytes[at + i]) continue next;
    return s;
  }
  return undefined;
}

function remember(s: string): void {
  if (known.length >= KNOWN_MAX || s.length > KNOWN_MAX_LENGTH) return;
  // ASCII only: one byte a character, so a string's bytes are its character codes.
  for (let i = 0; i < s.length; i++) if (s.charCodeAt(i) > 0x7f) return;
  known.push(s);
}

class Reader {
  readonly #bytes: Uint8Array;
  readonly #view: DataView;
  at = 0;

  constructor(bytes: Uint8Array) {
    this.#bytes = bytes;
    this.#view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  get done(): boolean {
    return this.at === this.#bytes.length;
  }

  #byte(): number {
    if (this.at >= this.#bytes.length) throw DECLINE;
    return this.#bytes[this.at++] ?? 0;
  }

  #need(n: number): number {
    const at = this.at;
    if (at + n > this.#bytes.length) throw DECLINE;
    this.at += n;
    return at;
  }

  /**
   * `n` unsigned integers of up to 32 bits: the token ids, in one loop over the bytes (fixint,
   * uint8, uint16, uint32: what msgspec writes for a non-negative id); anything else declines.
   */
  uints(n: number): number[] {
    const bytes = this.#bytes;
    const out = new Array<number>(n);
    let at = this.at;
    for (let i = 0; i < n; i++) {
      const b = bytes[at] ?? 0xc1;
      if (b <= 0x7f) {
        out[i] = b;
        at += 1;
      } else if (b === 0xcd && at + 3 <= bytes.length) {
        out[i] = ((bytes[at + 1] ?? 0) << 8) | (bytes[at + 2] ?? 0);
        at += 3;
      } else if (b === 0xcc && at + 2 <= bytes.length) {
        out[i] = bytes[at + 1] ?? 0;
        at += 2;
      } else if (b === 0xce && at + 5 <= bytes.length) {
        out[i] = this.#view.getUint32(at + 1);
        at += 5;
      } else throw DECLINE;
    }
    this.at = at;
    return out;
  }

  /** nil: true (consumed); otherwise false, nothing consumed. */
  nil(): boolean {
    if (this.#bytes[this.at] !== 0xc0) return false;
    this.at++;
    return true;
  }

  arrayLength(): number {
    const b = this.#byte();
    if (b >= 0x90 && b <= 0x9f) return b & 0x0f;
    if (b === 0xdc) return this.#view.getUint16(this.#need(2));
    if (b === 0xdd) return this.#view.getUint32(this.#need(4));
    throw DECLINE;
  }

  mapLength(): number {
    const b = this.#byte();
    if (b >= 0x80 && b <= 0x8f) return b & 0x0f;
    if (b === 0xde) return this.#view.getUint16(this.#need(2));
    if (b === 0xdf) return this.#view.getUint32(this.#need(4));
    throw DECLINE;
  }

  string(): string {
    const b = this.#byte();
    let n: number;
    if (b >= 0xa0 && b <= 0xbf) n = b & 0x1f;
    else if (b === 0xd9) n = this.#view.getUint8(this.#need(1));
    else if (b === 0xda) n = this.#view.getUint16(this.#need(2));
    else if (b === 0xdb) n = this.#view.getUint32(this.#need(4));
    else throw DECLINE;
    const at = this.#need(n);
    const seen = n <= KNOWN_MAX_LENGTH ? knownString(this.#bytes, at, n) : undefined;
    if (seen !== undefined) return seen;
    let s: string;
    try {
      s = TEXT.decode(this.#bytes.subarray(at, at + n));
    } catch {
      throw DECLINE;
    }
    remember(s);
    return s;
  }

  /** An integer msgpack gives as a number (every width but 64-bit); else declines. */
  smallInt(): number {
    const b = this.#byte();
    if (b <= 0x7f) return b;
    if (b >= 0xe0) return b - 0x100;
    switch (b) {
      case 0xcc:
        return this.#view.getUint8(this.#need(1));
      case 0xcd:
        return this.#view.getUint16(this.#need(2));
      case 0xce:
        return this.#view.getUint32(this.#need(4));
      case 0xd0:
        return this.#view.getInt8(this.#need(1));
      case 0xd1:
        return this.#view.getInt16(this.#need(2));
      case 0xd2:
        return this.#view.getInt32(this.#need(4));
      default:
        throw DECLINE;
    }
  }

  /** A signed 64-bit hash in any integer form (decode.ts's readInt64); else declines. */
  int64(): bigint {
    const b = this.#bytes[this.at];
    if (b === 0xd3) return this.#view.getBigInt64(this.#need(9) + 1);
    if (b === 0xcf) {
      const v = this.#view.getBigUint64(this.#need(9) + 1);
      if (v > INT64_MAX) throw DECLINE;
      return v;
    }
    return BigInt(this.smallInt());
  }

  /** A float (or an integer as a number): the batch's timestamp. */
  number(): number {
    const b = this.#bytes[this.at];
    if (b === 0xcb) return this.#view.getFloat64(this.#need(9) + 1);
    if (b === 0xca) return this.#view.getFloat32(this.#need(5) + 1);
    return this.smallInt();
  }
}

/** The batch decode.ts would decode from `payload`, or null where this reader declines. */
export function readFastBatch(payload: Uint8Array): KvEventBatch | null {
  try {
    const r = new Reader(payload);
    const size = r.arrayLength();
    if (size < 2 || size > 3) return null;
    const ts = r.number();
    if (!Number.isFinite(ts)) return null;
    const count = r.arrayLength();
    const events = new Array<KvCacheEvent>(count);
    for (let i = 0; i < count; i++) events[i] = readEvent(r);
    let dpRank: number | null = null;
    if (size === 3 && !r.nil()) dpRank = r.smallInt();
    return r.done ? { timestampMs: ts * 1000, events, dpRank } : null;
  } catch (e) {
    if (e === DECLINE) return null;
    throw e;
  }
}

interface Fields {
  type?: string;
  block_hashes?: bigint[];
  parent_block_hash?: bigint | null;
  token_ids?: number[];
  block_size?: number;
  lora_id?: number | null;
  medium?: StorageMedium | null;
  cache_salt?: string | null;
}

function readEvent(r: Reader): KvCacheEvent {
  const f: Fields = {};
  const keys = r.mapLength();
  for (let k = 0; k < keys; k++) {
    const key = r.string();
    if (Object.hasOwn(f, key)) throw DECLINE;
    readField(r, key, f);
  }
  return buildEvent(f);
}

function readField(r: Reader, key: string, f: Fields): void {
  switch (key) {
    case 'type':
      f.type = r.string();
      return;
    case 'block_hashes':
      f.block_hashes = readHashes(r);
      return;
    case 'parent_block_hash':
      f.parent_block_hash = r.nil() ? null : r.int64();
      return;
    case 'token_ids':
      f.token_ids = readTokenIds(r);
      return;
    case 'block_size':
      f.block_size = r.smallInt();
      return;
    case 'lora_id':
      f.lora_id = r.nil() ? null : r.smallInt();
      return;
    case 'medium':
      f.medium = r.nil() ? null : readMedium(r);
      return;
    case 'cache_salt':
      f.cache_salt = r.nil() ? null : r.string();
      return;
    // Published when set (a session, a LoRA adapter), read by no one here: skipped, as decode.ts ignores them.
    case 'session_id':
    case 'lora_name':
      if (!r.nil()) r.string();
      return;
    default:
      throw DECLINE;
  }
}

function readHashes(r: Reader): bigint[] {
  const n = r.arrayLength();
  const out = new Array<bigint>(n);
  for (let i = 0; i < n; i++) out[i] = r.int64();
  return out;
}

function readTokenIds(r: Reader): number[] {
  return r.uints(r.arrayLength());
}

function readMedium(r: Reader): StorageMedium {
  const m = r.string();
  if (!MEDIA.has(m)) throw DECLINE;
  return m as StorageMedium;
}

/** The event decode.ts builds from the same fields; declines where it would refuse them. */
function buildEvent(f: Fields): KvCacheEvent {
  const medium = f.medium ?? 'GPU';
  switch (f.type) {
    case 'BlockStored':
      if (
        f.block_hashes === undefined ||
        f.parent_block_hash === undefined ||
        f.token_ids === undefined ||
        f.block_size === undefined ||
        f.block_size < 1 ||
        f.lora_id === undefined
      )
        throw DECLINE;
      return {
        type: 'BlockStored',
        blockHashes: f.block_hashes,
        parentBlockHash: f.parent_block_hash,
        tokenIds: f.token_ids,
        blockSize: f.block_size,
        loraId: f.lora_id,
        medium,
        cacheSalt: f.cache_salt ?? null,
      };
    case 'BlockRemoved':
      if (f.block_hashes === undefined) throw DECLINE;
      return { type: 'BlockRemoved', blockHashes: f.block_hashes, medium };
    case 'AllBlocksCleared':
      return { type: 'AllBlocksCleared' };
    default:
      throw DECLINE;
  }
}
