// Block hashes of SGLang 0.5.23's KV events, computed as its radix tree does
// (mem_cache/cpp_utils/hash_binding.cpp, mem_cache/utils.py, the Rust tree
// core's copy of both):
//
// - A block is one page of `pageSize` tokens. Its digest is
//   SHA-256(prior digest (32 bytes, absent for the first page of an
//   unsalted chain) || the page's token ids as little-endian uint32).
// - Pages chain: a page's prior is the previous page's digest, across radix
//   nodes (a child's first page chains from its parent's last page).
// - With a cache_salt the chain starts from
//   SHA-256("sglang-cache-salt-v1\0" || salt) instead of nothing. An
//   extra_key alone changes nothing (the default event format keys only
//   LoRA adapters by it, and the simulator has none).
// - The published int64 is the digest's first 8 bytes, big-endian, signed
//   (hash_str_to_int64 of the hex digest's first 16 characters).
//
// The SGLang contract both sides keep: the simulator publishes these hashes,
// the gateway computes a request's to look its pages up in the KV index.
// Pure and deterministic. The pages' SHA-256 is sha256-words.ts (about 0.6
// us a page here, against 1.1 us for node:crypto's one-shot `hash`, whose
// cost is mostly the call); the salt's seed is node:crypto's.

import { createHash } from 'node:crypto';
import { digestWords, sha256Words } from './sha256-words.ts';

export type Digest = Buffer;

const SALT_TAG = Buffer.from('sglang-cache-salt-v1\0', 'utf8');

/** The digest a salted chain starts from; null (no prior) without a salt. */
export function computeSaltSeed(cacheSalt: string | null): Digest | null {
  if (cacheSalt === null) return null;
  // createHash: the seed is computed once per salt, and the tag's NUL stays a separate update.
  return createHash('sha256').update(SALT_TAG).update(cacheSalt, 'utf8').digest();
}

/** Digests of each whole or trailing page of `tokens`, chained from `prior`. */
export function computePageDigests(
  prior: Digest | null,
  tokens: readonly number[],
  pageSize: number,
): Digest[] {
  const out: Digest[] = [];
  let last = prior;
  for (let start = 0; start < tokens.length; start += pageSize) {
    last = computePageDigest(last, tokens, start, Math.min(start + pageSize, tokens.length));
    out.push(last);
  }
  return out;
}

/** The digest of the page `tokens[start, end)` chained from `prior`. */
export function computePageDigest(
  prior: Digest | null,
  tokens: ArrayLike<number>,
  start: number,
  end: number,
): Digest {
  let offset = 0;
  if (prior) {
    const words = messageFor(end - start);
    for (let i = 0; i < DIGEST_WORDS; i++) words[i] = prior.readInt32BE(4 * i);
    offset = DIGEST_WORDS;
  }
  hashPage(offset, tokens, start, end);
  const out = Buffer.allocUnsafe(4 * DIGEST_WORDS);
  for (let i = 0; i < DIGEST_WORDS; i++) out.writeInt32BE(digestWords[i] ?? 0, 4 * i);
  return out;
}

/**
 * Each whole page's block hash, chained from `prior`, as the int64's two int32 halves:
 * [high 0, low 0, high 1, low 1, ...] (toBlockHash of each page's digest, without a bigint
 * or a Buffer a page). For a request's many pages: a 220 KB prompt is ~2,800 at page size 16.
 */
export function computePackedBlockHashes(
  prior: Digest | null,
  tokens: ArrayLike<number>,
  pageSize: number,
): Int32Array {
  const pages = Math.floor(tokens.length / pageSize);
  const out = new Int32Array(pages * 2);
  const words = messageFor(pageSize);
  let offset = 0;
  if (prior) {
    for (let i = 0; i < DIGEST_WORDS; i++) words[i] = prior.readInt32BE(4 * i);
    offset = DIGEST_WORDS;
  }
  for (let p = 0; p < pages; p++) {
    hashPage(offset, tokens, p * pageSize, (p + 1) * pageSize);
    out[2 * p] = digestWords[0] ?? 0;
    out[2 * p + 1] = digestWords[1] ?? 0;
    // The next page chains from this digest.
    for (let i = 0; i < DIGEST_WORDS; i++) words[i] = digestWords[i] ?? 0;
    offset = DIGEST_WORDS;
  }
  return out;
}

// The SHA-256 is sha256-words.ts's, not node:crypto's: a page is 96 bytes, and node:crypto's cost a
// call (~1 us here) was twice that of the two compressions in JavaScript. The message is built as
// SHA-256's big-endian words: the prior digest's words as they are, each token id byte-swapped
// (SGLang hashes it little-endian).
const DIGEST_WORDS = 8;
let message = new Int32Array(DIGEST_WORDS + 64);

/** The message scratch, with room for a prior digest and `pageTokens` ids. */
function messageFor(pageTokens: number): Int32Array {
  if (message.length < DIGEST_WORDS + pageTokens) message = new Int32Array(DIGEST_WORDS + pageTokens);
  return message;
}

/** SHA-256 of message[0, offset) then `tokens[start, end)` as little-endian uint32s, into digestWords. */
function hashPage(offset: number, tokens: ArrayLike<number>, start: number, end: number): void {
  const words = messageFor(end - start);
  for (let i = start; i < end; i++) {
    const id = tokens[i] ?? -1;
    if (!Number.isInteger(id) || id < 0 || id > 0xffff_ffff) {
      throw new RangeError(`token id ${id} does not fit in uint32`);
    }
    words[offset + i - start] =
      ((id & 0xff) << 24) | ((id & 0xff00) << 8) | ((id >>> 8) & 0xff00) | (id >>> 24);
  }
  sha256Words(words, offset + end - start);
}

/** The int64 SGLang publishes for a block digest. */
export function toBlockHash(digest: Digest): bigint {
  return digest.readBigInt64BE(0);
}
