// A ResultStore in Redis, shared by every gateway replica, with in-flight
// de-duplication across replicas.
//
// Keys (prefix `cacheroute:reuse:` by default; `<k>` is the reuse key, a sha256):
//   <prefix><k>         the result, JSON, SET … PX ttl
//   <prefix><k>:lock    "one replica is generating <k>": a random token, SET NX PX claimTtlMs
//   <prefix>lru         sorted set: <k> scored by last access, in ticks of <prefix>lru:tick
//                       (a counter, not a clock: strictly ordered across replicas, no ties)
//   <prefix>done        pub/sub channel: <k> is published when a result lands or a claim is let go
//
// get(k) in one script: the result (and a touch of its LRU score), or a claim
// taken for the caller (it returns a miss: the caller generates, and its set()
// stores, lets the claim go and publishes), or "claimed elsewhere" with the
// claim's remaining time. Then it waits for a publish on <prefix>done, or for
// the claim to run out, whichever comes first, and asks again: a result ends
// the wait, a vanished claim is taken over. The owner renews its claim every
// claimTtlMs/3 while it lives, so a replica that dies stops renewing and its
// claim is gone within claimTtlMs; a lost publish costs at most that much too.
// A waiter gives up after waitTimeoutMs and generates without a claim.
//
// Bound: the LRU sorted set is trimmed to maxEntries in the same script that
// writes a result, deleting the evicted results. Chosen over TTL + Redis
// `maxmemory`: maxmemory is a server-wide setting of an instance the gateway
// may share, it bounds bytes rather than entries, and with the default
// `noeviction` policy it makes writes fail instead of evicting. Index members
// whose result already expired are swept from the cold end on each write.
//
// A claim ends with set(), delete(), release() or close(). A generation that
// fails, or whose answer may not be stored, calls none of these through the
// ResultStore interface as it stands: release(key) is there for ResultReuser
// to call when its leader ends without a result; until it does, such a claim
// is renewed until claimMaxMs (or this replica's next get() of the key), and
// other replicas wait for it up to waitTimeoutMs before generating themselves.
//
// Entries are signed (signed-entry.ts): one read that is not ours for its key
// — unsigned, signed with another key, moved from another key, past its
// signed expiry, or larger than any entry we write (checked in the script,
// before it crosses the network) — is refused: counted in stats.refused
// (cacheroute_gateway_reuse_store_refused_total), logged at most once a
// minute, and treated as a miss, whose result then overwrites it.
//
// Every Redis failure degrades to "miss, no claim": the request is generated,
// never failed, because of the store. Multi-key scripts touch keys they compute
// from the prefix: this targets a single Redis (or a primary with replicas),
// not Redis Cluster.

import { randomUUID } from 'node:crypto';
import { Redis, type RedisOptions } from 'ioredis';
import { z } from 'zod';
import { monotonicClock, type Clock, type Timer } from '#kube/clock.ts';
import { ENVELOPE_MAX_BYTES, EntrySigner, type HmacKeys, type RefusalReason } from './signed-entry.ts';
import type { ResultStore, StoredResult } from './store.ts';

export const DEFAULT_REDIS_PREFIX = 'cacheroute:reuse:';

export interface RedisStoreOptions {
  /** redis://[user:pass@]host:port[/db] */
  readonly url: string;
  /** Sign every entry written and verify every entry read (--reuse-hmac-key-file). */
  readonly hmacKeys: HmacKeys;
  readonly prefix?: string;
  /** Results kept across all replicas; the least recently used go first. Default 10 000. */
  readonly maxEntries?: number;
  /** Larger results are not shared (they are still returned). Default 8 MiB. */
  readonly maxValueBytes?: number;
  /** Lifetime of an unrenewed claim: how soon a dead owner's work is taken over. Default 10 s. */
  readonly claimTtlMs?: number;
  /** The owner stops renewing after this long. Default 2 min. */
  readonly claimMaxMs?: number;
  /** A waiter generates itself after this long. Default 30 s. */
  readonly waitTimeoutMs?: number;
  /** Per command; a slower Redis counts as a failure (a miss). Default 2 s. */
  readonly commandTimeoutMs?: number;
  readonly clock?: Clock;
  /** Wall-clock ms, for the signed expiry replicas compare (default Date.now). */
  readonly wallClock?: () => number;
  readonly logger?: { warn(obj: object, msg: string): void };
}

/** Why an entry read was not served: signed-entry.ts's reasons, or larger than any we write. */
export type StoreRefusalReason = RefusalReason | 'oversized';

/** How often refused entries are logged (a count since the last line), at most. */
const REFUSAL_LOG_INTERVAL_MS = 60_000;

export interface RedisStoreStats {
  hits: number;
  misses: number;
  claims: number;
  /** get() calls that found a claim held elsewhere and waited. */
  waits: number;
  /** Waits that ended in a result another replica wrote. */
  shared: number;
  /** Claims taken over after their owner let go or died. */
  takeovers: number;
  waitTimeouts: number;
  errors: number;
  /** Entries read and not served: not signed by our keys for their key, expired, or too large. */
  refused: Record<StoreRefusalReason, number>;
}

// What the gateway itself writes: an HTTP status and a media type of sensible length.
const StoredResultJson = z.object({
  status: z.number().int().min(100).max(599),
  contentType: z.string().max(256),
  body: z.string(),
});

// KEYS: value, lru, claim. ARGV: member, token, claimTtlMs, max value bytes.
// → {1, json} hit · {2} claimed for the caller · {3, pttl} claimed elsewhere · {4, bytes} too large to be ours
const ACQUIRE = `
local v = redis.call('GET', KEYS[1])
if v then
  if string.len(v) > tonumber(ARGV[4]) then return {4, string.len(v)} end
  redis.call('ZADD', KEYS[2], redis.call('INCR', KEYS[2] .. ':tick'), ARGV[1])
  return {1, v}
end
if redis.call('SET', KEYS[3], ARGV[2], 'NX', 'PX', ARGV[3]) then return {2} end
return {3, redis.call('PTTL', KEYS[3])}
`;

// KEYS: value, lru, claim. ARGV: json, ttlMs, member, maxEntries, token, prefix, channel.
const STORE = `
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('ZADD', KEYS[2], redis.call('INCR', KEYS[2] .. ':tick'), ARGV[3])
for _, m in ipairs(redis.call('ZRANGE', KEYS[2], 0, 7)) do
  if redis.call('EXISTS', ARGV[6] .. m) == 0 then redis.call('ZREM', KEYS[2], m) end
end
local over = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[4])
if over > 0 then
  local victims = redis.call('ZPOPMIN', KEYS[2], over)
  for i = 1, #victims, 2 do redis.call('DEL', ARGV[6] .. victims[i]) end
end
if ARGV[5] ~= '' and redis.call('GET', KEYS[3]) == ARGV[5] then redis.call('DEL', KEYS[3]) end
redis.call('PUBLISH', ARGV[7], ARGV[3])
return 1
`;

// KEYS: claim. ARGV: token, claimTtlMs. → 1 renewed, 0 lost
const RENEW = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
`;

// KEYS: claim. ARGV: token, channel, member. Lets go of our claim and wakes the waiters.
const RELEASE = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], ARGV[3])
  return 1
end
return 0
`;

// The script's answer, checked all the same: its values come from what Redis holds.
const AcquireAnswer = z.union([
  z.tuple([z.literal(1), z.string()]),
  z.tuple([z.literal(2)]),
  z.tuple([z.literal(3), z.number().int()]),
  z.tuple([z.literal(4), z.number().int()]),
]);

type Script = (...args: (string | number)[]) => Promise<unknown>;

interface Keys {
  readonly value: string;
  readonly claim: string;
}

interface Claim {
  readonly token: string;
  readonly since: number;
  timer: Timer | undefined;
}

/** One waiting get(): woken by a publish for its key, a timer, or close(). */
class Wake {
  #notified = false;
  #resolve: (() => void) | undefined;

  notify(): void {
    this.#notified = true;
    this.#resolve?.();
  }

  wait(ms: number, clock: Clock): Promise<void> {
    if (this.#notified) {
      this.#notified = false;
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => {
      const timer = clock.setTimer(ms, () => this.notify());
      this.#resolve = () => {
        timer.cancel();
        this.#resolve = undefined;
        this.#notified = false;
        resolve();
      };
    });
  }
}

export class RedisResultStore implements ResultStore {
  readonly stats: RedisStoreStats = {
    hits: 0,
    misses: 0,
    claims: 0,
    waits: 0,
    shared: 0,
    takeovers: 0,
    waitTimeouts: 0,
    errors: 0,
    refused: { malformed: 0, signature: 0, expired: 0, oversized: 0 },
  };
  readonly #client: Redis;
  readonly #subscriber: Redis;
  readonly #prefix: string;
  readonly #channel: string;
  readonly #lru: string;
  readonly #maxEntries: number;
  readonly #maxValueBytes: number;
  readonly #claimTtlMs: number;
  readonly #claimMaxMs: number;
  readonly #waitTimeoutMs: number;
  readonly #clock: Clock;
  readonly #wallClock: () => number;
  readonly #signer: EntrySigner;
  readonly #logger: RedisStoreOptions['logger'];
  readonly #claims = new Map<string, Claim>();
  readonly #wakes = new Map<string, Set<Wake>>();
  readonly #acquire: Script;
  readonly #store: Script;
  readonly #renew: Script;
  readonly #release: Script;
  #subscribed: Promise<boolean> | undefined;
  #closed = false;
  #lastRefusalLogAt = -Infinity;
  #refusedSinceLog = 0;

  constructor(opts: RedisStoreOptions) {
    this.#prefix = opts.prefix ?? DEFAULT_REDIS_PREFIX;
    this.#channel = `${this.#prefix}done`;
    this.#lru = `${this.#prefix}lru`;
    this.#maxEntries = opts.maxEntries ?? 10_000;
    if (!(this.#maxEntries >= 1)) throw new RangeError('maxEntries must be at least 1');
    this.#maxValueBytes = opts.maxValueBytes ?? 8 * 1024 * 1024;
    this.#claimTtlMs = opts.claimTtlMs ?? 10_000;
    this.#claimMaxMs = opts.claimMaxMs ?? 120_000;
    this.#waitTimeoutMs = opts.waitTimeoutMs ?? 30_000;
    this.#clock = opts.clock ?? monotonicClock;
    this.#wallClock = opts.wallClock ?? Date.now;
    this.#signer = new EntrySigner(opts.hmacKeys);
    this.#logger = opts.logger;
    const redisOptions: RedisOptions = { maxRetriesPerRequest: 1, connectionName: 'cacheroute-gateway' };
    this.#client = new Redis(opts.url, { ...redisOptions, commandTimeout: opts.commandTimeoutMs ?? 2_000 });
    // A subscribed connection can do nothing else: a second one for the channel.
    this.#subscriber = new Redis(opts.url, redisOptions);
    for (const c of [this.#client, this.#subscriber])
      c.on('error', (err: unknown) => this.#logger?.warn({ err }, 'redis result store: connection error'));
    this.#subscriber.on('message', (_channel: string, member: string) => {
      for (const w of this.#wakes.get(member) ?? []) w.notify();
    });
    this.#client.defineCommand('cacherouteAcquire', { numberOfKeys: 3, lua: ACQUIRE });
    this.#client.defineCommand('cacherouteStore', { numberOfKeys: 3, lua: STORE });
    this.#client.defineCommand('cacherouteRenew', { numberOfKeys: 1, lua: RENEW });
    this.#client.defineCommand('cacherouteRelease', { numberOfKeys: 1, lua: RELEASE });
    const scripts = this.#client as unknown as Record<string, Script>;
    const bind = (name: string): Script => (scripts[name] as Script).bind(this.#client);
    this.#acquire = bind('cacherouteAcquire');
    this.#store = bind('cacherouteStore');
    this.#renew = bind('cacherouteRenew');
    this.#release = bind('cacherouteRelease');
  }

  /** get() calls in this replica waiting for a result another replica is generating. */
  get waitingCount(): number {
    let n = 0;
    for (const set of this.#wakes.values()) n += set.size;
    return n;
  }

  /** Claims this replica holds (results it is generating for everyone). */
  get claimCount(): number {
    return this.#claims.size;
  }

  async get(key: string): Promise<StoredResult | undefined> {
    if (this.#closed) return undefined;
    const keys = this.#keysOf(key);
    const deadline = this.#clock.now() + this.#waitTimeoutMs;
    const wake = new Wake();
    let waited = false;
    try {
      // A claim of ours on this key outlived the request that took it (its answer was not
      // stored and release() was not called): ResultReuser runs one request per key at a time,
      // so that request is over. Let the claim go and ask afresh.
      if (this.#claims.has(key)) await this.release(key);
      // Listening before asking: a publish between the answer and the wait is not lost.
      if (!(await this.#ensureSubscribed())) return this.#miss();
      this.#listen(key, wake);
      for (;;) {
        const token = randomUUID();
        const answer = AcquireAnswer.parse(
          await this.#acquire(
            keys.value,
            this.#lru,
            keys.claim,
            key,
            token,
            this.#claimTtlMs,
            this.#maxValueBytes + ENVELOPE_MAX_BYTES,
          ),
        );
        if (answer[0] === 1) return this.#hit(keys.value, answer[1], waited);
        if (answer[0] === 4) return this.#refuse('oversized', keys.value);
        if (answer[0] === 2) {
          this.#hold(key, keys, token);
          if (waited) this.stats.takeovers++;
          return this.#miss();
        }
        const left = deadline - this.#clock.now();
        if (left <= 0 || this.#closed) {
          this.stats.waitTimeouts++;
          return this.#miss();
        }
        if (!waited) this.stats.waits++;
        waited = true;
        // pttl -1/-2: the claim lost its expiry or just went: look again soon.
        const claimLeft = answer[1] > 0 ? answer[1] + 5 : 5;
        await wake.wait(Math.min(left, claimLeft), this.#clock);
      }
    } catch (err) {
      this.#failed(err, 'get');
      return this.#miss();
    } finally {
      this.#unlisten(key, wake);
    }
  }

  async set(key: string, value: StoredResult, ttlMs: number): Promise<void> {
    const claim = this.#drop(key);
    const keys = this.#keysOf(key);
    const json = JSON.stringify(value);
    const px = Math.max(1, Math.round(ttlMs));
    try {
      if (Buffer.byteLength(json) > this.#maxValueBytes) {
        if (claim) await this.#release(keys.claim, claim.token, this.#channel, key);
        return;
      }
      await this.#store(
        keys.value,
        this.#lru,
        keys.claim,
        this.#signer.seal(keys.value, json, this.#wallClock() + px),
        px,
        key,
        this.#maxEntries,
        claim?.token ?? '',
        this.#prefix,
        this.#channel,
      );
    } catch (err) {
      this.#failed(err, 'set');
    }
  }

  async delete(key: string): Promise<void> {
    const keys = this.#keysOf(key);
    try {
      await this.#client.multi().del(keys.value).zrem(this.#lru, key).exec();
      await this.release(key);
    } catch (err) {
      this.#failed(err, 'delete');
    }
  }

  /**
   * The caller is done with a key whose get() missed, without a result to
   * store (the upstream failed, or the answer may not be reused): let the
   * claim go now, so waiting replicas take over at once rather than after
   * waitTimeoutMs. A no-op when this replica holds no claim on the key.
   */
  async release(key: string): Promise<void> {
    const claim = this.#drop(key);
    if (!claim) return;
    try {
      await this.#release(this.#keysOf(key).claim, claim.token, this.#channel, key);
    } catch (err) {
      this.#failed(err, 'release');
    }
  }

  /** Lets go of every claim (so other replicas take over at once), wakes waiters, disconnects. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const set of this.#wakes.values()) for (const w of set) w.notify();
    await Promise.all([...this.#claims.keys()].map((key) => this.release(key)));
    await Promise.all([quit(this.#client), quit(this.#subscriber)]);
  }

  #keysOf(key: string): Keys {
    return { value: `${this.#prefix}${key}`, claim: `${this.#prefix}${key}:lock` };
  }

  #miss(): undefined {
    this.stats.misses++;
    return undefined;
  }

  #hit(redisKey: string, stored: string, waited: boolean): StoredResult | undefined {
    const opened = this.#signer.open(redisKey, stored, this.#wallClock());
    if (!opened.ok) return this.#refuse(opened.reason, redisKey);
    const value = parseStoredResult(opened.json);
    // Signed by us yet not what we write: a bug, or a key that leaked. Refused all the same.
    if (!value) return this.#refuse('malformed', redisKey);
    this.stats.hits++;
    if (waited) this.stats.shared++;
    return value;
  }

  /** Not ours for this key: never served; a miss, whose result overwrites it. */
  #refuse(reason: StoreRefusalReason, redisKey: string): undefined {
    this.stats.refused[reason]++;
    this.#refusedSinceLog++;
    const now = this.#clock.now();
    if (now - this.#lastRefusalLogAt >= REFUSAL_LOG_INTERVAL_MS) {
      this.#logger?.warn(
        {
          refused: this.#refusedSinceLog,
          lastReason: reason,
          lastKey: redisKey,
          total: { ...this.stats.refused },
        },
        'redis result store: refused entries not signed by this tier for their key (treated as misses): ' +
          'something other than the gateways writes to Redis, or the replicas hold different ' +
          '--reuse-hmac-key-file keys',
      );
      this.#lastRefusalLogAt = now;
      this.#refusedSinceLog = 0;
    }
    return this.#miss();
  }

  #ensureSubscribed(): Promise<boolean> {
    this.#subscribed ??= this.#subscriber.subscribe(this.#channel).then(
      () => true,
      (err: unknown) => {
        this.#subscribed = undefined; // try again on the next get()
        this.#failed(err, 'subscribe');
        return false;
      },
    );
    return this.#subscribed;
  }

  #listen(key: string, wake: Wake): void {
    let set = this.#wakes.get(key);
    if (!set) this.#wakes.set(key, (set = new Set()));
    set.add(wake);
  }

  #unlisten(key: string, wake: Wake): void {
    const set = this.#wakes.get(key);
    set?.delete(wake);
    if (set?.size === 0) this.#wakes.delete(key);
  }

  /** We generate `key` for every replica: keep the claim alive while we live. */
  #hold(key: string, keys: Keys, token: string): void {
    this.stats.claims++;
    this.#drop(key);
    const claim: Claim = { token, since: this.#clock.now(), timer: undefined };
    const renew = () => {
      if (this.#claims.get(key) !== claim) return;
      if (this.#clock.now() - claim.since >= this.#claimMaxMs) {
        this.#claims.delete(key); // let it run out: the generation outlived any waiter
        return;
      }
      this.#renew(keys.claim, token, this.#claimTtlMs).then(
        (renewed) => {
          if (renewed === 1 && this.#claims.get(key) === claim)
            claim.timer = this.#clock.setTimer(this.#claimTtlMs / 3, renew);
          else if (this.#claims.get(key) === claim) this.#claims.delete(key);
        },
        (err: unknown) => {
          this.#failed(err, 'renew');
          if (this.#claims.get(key) === claim)
            claim.timer = this.#clock.setTimer(this.#claimTtlMs / 3, renew);
        },
      );
    };
    claim.timer = this.#clock.setTimer(this.#claimTtlMs / 3, renew);
    this.#claims.set(key, claim);
  }

  #drop(key: string): Claim | undefined {
    const claim = this.#claims.get(key);
    if (!claim) return undefined;
    claim.timer?.cancel();
    this.#claims.delete(key);
    return claim;
  }

  #failed(err: unknown, op: string): void {
    this.stats.errors++;
    this.#logger?.warn({ err, op }, 'redis result store: command failed; treating as a miss');
  }
}

function parseStoredResult(json: string): StoredResult | undefined {
  try {
    const r = StoredResultJson.safeParse(JSON.parse(json));
    return r.success ? r.data : undefined;
  } catch {
    return undefined;
  }
}

async function quit(c: Redis): Promise<void> {
  try {
    await c.quit();
  } catch {
    c.disconnect();
  }
}
