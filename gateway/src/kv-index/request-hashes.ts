// A request's block hashes, as SGLang 0.5.23 keys the pages it would cache
// for it (kv-event-hash.ts): whole pages only (SGLang's tree holds no
// partial page), chained from the cache_salt's seed, so two salts never share
// a block. extra_key does not enter (the default event format hashes tokens
// and salt only); LoRA adapters would, and are not modelled here.
//
// SGLang matches at most all but the last prompt token (the last one's
// logits must be computed), so a caller predicting the cached_tokens the
// runtime will report passes tokens.slice(0, -1).
//
// Cost: one SHA-256 a page (about 1 us, kv-event-hash.ts): a 2k-token
// prompt is 128 hashes at page size 16, 2k at page size 1; a 220 KB prompt
// (~45k tokens) 2,800. The index reads them packed (no bigint a page:
// computeRequestPackedHashes). The salt's seed is
// one more, computed once per salt: a gateway sees a few salts (one per
// policy, tenant and client salt), every request of each.

import {
  computePackedBlockHashes,
  computePageDigest,
  computeSaltSeed,
  toBlockHash,
  type Digest,
} from '#sglang/kv-event-hash.ts';
import { PackedBlockHashes } from './packed-hashes.ts';

/** Seeds kept; past it the memo starts again (salts come from a few policies and tenants). */
const MAX_SEEDS = 4096;
const seeds = new Map<string, Digest>();

/** computeSaltSeed, once per salt (the digest is only ever read: computePageDigest copies it). */
export function readSaltSeed(cacheSalt: string | null): Digest | null {
  if (cacheSalt === null) return null;
  let seed = seeds.get(cacheSalt);
  if (seed === undefined) {
    if (seeds.size >= MAX_SEEDS) seeds.clear();
    seed = computeSaltSeed(cacheSalt) as Digest;
    seeds.set(cacheSalt, seed);
  }
  return seed;
}

export function computeRequestBlockHashes(
  tokens: readonly number[],
  pageSize: number,
  cacheSalt: string | null,
): bigint[] {
  if (!Number.isInteger(pageSize) || pageSize < 1) throw new RangeError('pageSize must be >= 1');
  const pages = Math.floor(tokens.length / pageSize);
  const out = new Array<bigint>(pages);
  let prior = readSaltSeed(cacheSalt);
  for (let p = 0; p < pages; p++) {
    prior = computePageDigest(prior, tokens, p * pageSize, (p + 1) * pageSize);
    out[p] = toBlockHash(prior);
  }
  return out;
}

/** computeRequestBlockHashes, packed as the KV index reads them (packed-hashes.ts). */
export function computeRequestPackedHashes(
  tokens: ArrayLike<number>,
  pageSize: number,
  cacheSalt: string | null,
): PackedBlockHashes {
  if (!Number.isInteger(pageSize) || pageSize < 1) throw new RangeError('pageSize must be >= 1');
  return new PackedBlockHashes(computePackedBlockHashes(readSaltSeed(cacheSalt), tokens, pageSize));
}
