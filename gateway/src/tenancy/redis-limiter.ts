// Tenants' rate counts in Redis, shared by every gateway replica, so a limit
// holds for the whole tier. One script per request checks both limits and
// counts the request only when it fits (rate-window.ts fitsLimits, in Lua),
// atomically, so two replicas cannot both take the last slot.
//
// Keys (prefix `cacheroute:limit:` by default): <prefix><tenant>:<r|t>:<window index>,
// counters that expire two windows after they start (the previous window
// is still read).
//
// A Redis failure lets the request in (counted nowhere) and is logged at most
// once a minute (as is an answer of the wrong shape: the counts are what Redis
// holds, and anyone who may write to it may write them): the limiter protects fair share, admission still protects the
// runtimes, and an outage of the shared store must not take the API down.

import { Redis } from 'ioredis';
import { z } from 'zod';
import type { Clock } from '#kube/clock.ts';
import type { RateLimiter } from './limiter.ts';
import {
  describeDecision,
  WINDOW_MS,
  windowFractionAt,
  windowIndexAt,
  type LimitDecision,
  type LimitName,
  type RateCost,
} from './rate-window.ts';
import type { Tenant } from './tenant.ts';

export const DEFAULT_LIMIT_PREFIX = 'cacheroute:limit:';

// KEYS: requests now, requests before, tokens now, tokens before.
// ARGV: fraction, rpm (-1: none), tpm (-1: none), prompt tokens, ttl ms, requests.
// → {refused by: 0 none, 1 requests, 2 tokens; requests now, requests before, tokens now, tokens before}
//   (counts before this request)
const ADMIT = `
local f = tonumber(ARGV[1])
local rpm = tonumber(ARGV[2])
local tpm = tonumber(ARGV[3])
local cost = tonumber(ARGV[6])
local rc = tonumber(redis.call('GET', KEYS[1]) or '0')
local rp = tonumber(redis.call('GET', KEYS[2]) or '0')
local tc = tonumber(redis.call('GET', KEYS[3]) or '0')
local tp = tonumber(redis.call('GET', KEYS[4]) or '0')
local rate = rp * (1 - f) + rc
if rpm >= 0 and rate > 0 and rate + cost > rpm then return {1, rc, rp, tc, tp} end
if tpm >= 0 and tp * (1 - f) + tc >= tpm then return {2, rc, rp, tc, tp} end
redis.call('INCRBY', KEYS[1], cost)
redis.call('PEXPIRE', KEYS[1], ARGV[5])
if tonumber(ARGV[4]) > 0 then
  redis.call('INCRBY', KEYS[3], ARGV[4])
  redis.call('PEXPIRE', KEYS[3], ARGV[5])
end
return {0, rc, rp, tc, tp}
`;

// Integers from the script: Lua numbers become Redis integers on the way out.
const AdmitAnswer = z.tuple([
  z.number().int().min(0).max(2),
  z.number().int(),
  z.number().int(),
  z.number().int(),
  z.number().int(),
]);

const REFUSED_BY: readonly (LimitName | undefined)[] = [undefined, 'requests', 'tokens'];

type AdmitScript = (...args: (string | number)[]) => Promise<unknown>;

export interface RedisLimiterOptions {
  readonly url: string;
  readonly prefix?: string;
  readonly clock: Clock;
  readonly commandTimeoutMs?: number;
  readonly logger?: { warn(obj: object, msg: string): void };
}

export class RedisRateLimiter implements RateLimiter {
  readonly #client: Redis;
  readonly #prefix: string;
  readonly #clock: Clock;
  readonly #log: RedisLimiterOptions['logger'];
  readonly #admit: AdmitScript;
  #lastWarnAt = -Infinity;
  /** Redis failures so far (requests let in uncounted). */
  errors = 0;

  constructor(opts: RedisLimiterOptions) {
    this.#client = new Redis(opts.url, {
      commandTimeout: opts.commandTimeoutMs ?? 1000,
      maxRetriesPerRequest: 1,
      connectionName: 'cacheroute-gateway-limits',
    });
    // ioredis reports connection errors here as well as on commands; the commands' failures are what count.
    this.#client.on('error', () => undefined);
    this.#client.defineCommand('cacherouteRateAdmit', { numberOfKeys: 4, lua: ADMIT });
    const scripts = this.#client as unknown as Record<string, AdmitScript>;
    this.#admit = (scripts['cacherouteRateAdmit'] as AdmitScript).bind(this.#client);
    this.#prefix = opts.prefix ?? DEFAULT_LIMIT_PREFIX;
    this.#clock = opts.clock;
    this.#log = opts.logger;
  }

  async admit(tenant: Tenant, cost: RateCost): Promise<LimitDecision> {
    const limits = tenant.limits;
    if (limits.requestsPerMinute === undefined && limits.tokensPerMinute === undefined)
      return { allowed: true };
    const now = this.#clock.now();
    const w = windowIndexAt(now);
    const fraction = windowFractionAt(now);
    try {
      const out = AdmitAnswer.parse(
        await this.#admit(
          this.#key(tenant, 'r', w),
          this.#key(tenant, 'r', w - 1),
          this.#key(tenant, 't', w),
          this.#key(tenant, 't', w - 1),
          fraction,
          limits.requestsPerMinute ?? -1,
          limits.tokensPerMinute ?? -1,
          Math.max(0, Math.round(cost.tokens)),
          2 * WINDOW_MS,
          Math.max(1, Math.round(cost.requests)),
        ),
      );
      const [refusedBy, rc, rp, tc, tp] = out;
      return describeDecision(
        { requests: { current: rc, previous: rp }, tokens: { current: tc, previous: tp } },
        limits,
        fraction,
        cost,
        REFUSED_BY[refusedBy],
      );
    } catch (err) {
      this.#failed(err);
      return { allowed: true };
    }
  }

  charge(tenant: Tenant, tokens: number): void {
    if (tenant.limits.tokensPerMinute === undefined || tokens <= 0) return;
    const key = this.#key(tenant, 't', windowIndexAt(this.#clock.now()));
    this.#client
      .multi()
      .incrby(key, Math.round(tokens))
      .pexpire(key, 2 * WINDOW_MS)
      .exec()
      .catch((err: unknown) => this.#failed(err));
  }

  async close(): Promise<void> {
    await this.#client.quit().catch(() => this.#client.disconnect());
  }

  #key(tenant: Tenant, limit: 'r' | 't', window: number): string {
    return `${this.#prefix}${tenant.id}:${limit}:${window}`;
  }

  #failed(err: unknown): void {
    this.errors++;
    const now = this.#clock.now();
    if (now - this.#lastWarnAt < WINDOW_MS) return;
    this.#lastWarnAt = now;
    this.#log?.warn(
      { err: err instanceof Error ? err.message : String(err), errors: this.errors },
      'rate limits: Redis failed; requests are let in uncounted until it answers',
    );
  }
}
