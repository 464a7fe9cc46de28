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
// Pure and deterministic; node:crypto is only the SHA-256 (one-shot `hash`:
// about 1.4 us a page here, against 1.8 us for createHash's three calls).

import { createHash, hash } from 'node:crypto';

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
  tokens: readonly number[],
  start: number,
  end: number,
): Digest {
  const offset = prior ? prior.length : 0;
  const buf = Buffer.allocUnsafe(offset + (end - start) * 4);
  if (prior) prior.copy(buf, 0);
  for (let i = start; i < end; i++) {
    const id = tokens[i] ?? -1;
    if (!Number.isInteger(id) || id < 0 || id > 0xffff_ffff) {
      throw new RangeError(`token id ${id} does not fit in uint32`);
    }
    buf.writeUInt32LE(id, offset + (i - start) * 4);
  }
  return hash('sha256', buf, 'buffer');
}

/** The int64 SGLang publishes for a block digest. */
export function toBlockHash(digest: Digest): bigint {
  return digest.readBigInt64BE(0);
}
