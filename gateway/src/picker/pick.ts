// The routing decision, apart from any transport: a parsed request in, what
// to do with it out. The steps, in order: validate the body → choose the
// Deployment (name, tenant, weighted split) → the policy's request rules
// (batch size, n, operator-only fields, media by reference) → the cache salt, stamped → the
// prompt's tokens (the model's tokenizer where a KV index can use them) →
// the tenant's rate limits → hold for a Deployment waking from zero → reuse
// (a stored answer, or the one an identical request in flight produces) →
// admission (this replica's share of the tier's bounds; may queue) → the
// endpoint and its fallbacks, or a prefill/decode pair with its bootstrap
// fields → the runtime's queue priority, stamped where the runtimes order by it
// (runtime-priority.ts). A step that says no ends the pick with a Refusal (shed, with
// Retry-After, or refuse); the front end sends, retries (lease.repick),
// delivers and reports outcomes to lease.policy, then settles the lease.
//
// Front ends: the fastify proxy (gateway.ts) and the Envoy ext_proc endpoint
// picker (epp/), over one Picker.
// Nothing here reaches fastify or undici (imports.test.ts holds that).

import { randomBytes } from 'node:crypto';
import { computeBootstrapRoom } from '#sglang/bootstrap.ts';
import { computeTenantSalt } from '#sglang/salt.ts';
import type { AdmissionRegistry, Permit } from '../admission/index.ts';
import { admitRequest } from '../admission/admit.ts';
import { sleep, type Clock } from '#kube/clock.ts';
import { GatewayError } from '../errors/index.ts';
import type { TierPosition } from '../fleet/tier-position.ts';
import type { KvIndexFleet, KvMatch } from '../kv-index/fleet.ts';
import type { GatewayMetrics } from '../metrics/index.ts';
import type { RouteInput, TierStanding } from '../policies/index.ts';
import type { PolicyRegistry } from '../routing/policy-registry.ts';
import {
  computeEffectiveSalt,
  computeExactTokens,
  computeMaxTokens,
  computeRouteTokens,
  computeTokenizerInput,
  parseBody,
  type ParsedBody,
} from '../request/shape.ts';
import { computeDeterminism, computeReuseKey, type ResultReuser } from '../reuse/index.ts';
import { chooseRoute } from '../routing/lookup.ts';
import { buildPairBootstrap, buildPdBody, isDisaggregated } from '../routing/pd.ts';
import type { ModelRoute, RouteEndpoint, RoutingTable } from '../routing/table.ts';
import { enforceTenantLimits } from '../tenancy/enforce.ts';
import type { RateLimiter } from '../tenancy/limiter.ts';
import type { Tenant } from '../tenancy/tenant.ts';
import { encodeRequest } from '../tokenize/request.ts';
import type { Tokenizer } from '../tokenize/tokenizer.ts';
import { computePromptTokens, enforceRequestRules } from '../request/rules.ts';
import { recordDecision } from './record.ts';
import { buildReusedAnswer } from './reused.ts';
import {
  computeUncachedTokens,
  stampRuntimePriorityWithStamp,
  type RuntimeStamp,
  type Stamped,
} from './runtime-priority.ts';
import {
  openSelection,
  selectEndpoint,
  selectFallbacks,
  selectPair,
  type MatchIndexed,
  type Selection,
  type SelectState,
} from './select.ts';
import type {
  Decision,
  PickLease,
  PickRequest,
  PickResult,
  PickScope,
  ReusedAnswer,
  ReuseTicket,
  Target,
} from './types.ts';
import { toRefusal } from './verdict.ts';
import type { WakeHolds } from './wake-hold.ts';

/** What the picker reads and holds across requests; the front end's process owns its lifecycle. */
export interface PickerState extends SelectState {
  readonly table: RoutingTable;
  readonly metrics: GatewayMetrics;
  readonly clock: Clock;
  /** One policy per Deployment. */
  readonly policies: PolicyRegistry;
  /** The runtimes' KV indexes. */
  readonly kvIndex: KvIndexFleet;
  /** Subscribes to a route's KV event publishers before it is routed to. */
  readonly followRoute: (route: ModelRoute) => void;
  /** Each served model's own tokenizer. */
  readonly tokenizers: ReadonlyMap<string, Tokenizer>;
  readonly limiter: RateLimiter;
  readonly wakeHolds: WakeHolds;
  readonly admission: AdmissionRegistry;
  /** This replica's place in the gateway tier: its share of the admission bounds. */
  readonly tier: TierPosition;
  /** Where the policy sees this replica in a tier that shares load; absent without a load exchange. */
  readonly tierStanding?: () => TierStanding | undefined;
  readonly reuser: ResultReuser;
  /** A uniform unsigned 32-bit integer (a pair's bootstrap room); crypto's by default. */
  readonly random32?: () => number;
}

const NO_MATCHES: ReadonlyMap<string, KvMatch> = new Map();

type ReuseStep =
  | { readonly kind: 'hit'; readonly answer: ReusedAnswer }
  | { readonly kind: 'miss'; readonly ticket: ReuseTicket };

export class Picker {
  readonly #s: PickerState;
  readonly #random32: () => number;

  constructor(state: PickerState) {
    this.#s = state;
    this.#random32 = state.random32 ?? (() => randomBytes(4).readUInt32BE(0));
  }

  async pick(req: PickRequest, scope: PickScope): Promise<PickResult> {
    const headers: Record<string, string> = {};
    try {
      return await this.#pick(req, scope, headers);
    } catch (err) {
      if (err instanceof GatewayError) return { kind: 'refused', headers, verdict: toRefusal(err) };
      throw err;
    }
  }

  async #pick(req: PickRequest, scope: PickScope, headers: Record<string, string>): Promise<PickResult> {
    const s = this.#s;
    const parsed = parseBody(req.kind, req.body);
    if (!parsed.ok) throw new GatewayError('GW_BAD_REQUEST', { detail: parsed.error });
    const { tenant } = req;
    const chosen = chooseRoute(s.table, parsed.value, req.headers, tenant);
    const size = enforceRequestRules(parsed.value, chosen);
    const salt = computeRequestSalt(chosen, tenant, parsed.value.body.cache_salt);
    // The parse's own copy of the client's body (zod builds a new object): stamped in place.
    const body: Record<string, unknown> = parsed.value.body;
    body['cache_salt'] = salt;
    if (req.kind === 'generate') delete body['model'];
    const exact =
      computeExactTokens(parsed.value) ??
      (this.#indexesTokens(chosen) ? await this.#tokenizeForIndex(chosen, parsed.value) : undefined);
    let input: RouteInput = {
      id: req.id,
      salt,
      tokens: exact ?? computeRouteTokens(parsed.value),
      now: s.clock.now(),
    };
    const maxTokens = computeMaxTokens(parsed.value);
    if (maxTokens !== undefined) input = { ...input, maxTokens };
    const standing = s.tierStanding?.();
    if (standing) input = { ...input, tier: standing };
    scope.trace?.routed(chosen.model, chosen.deployment, input.tokens.length, exact !== undefined);
    if (tenant) {
      // What the runtime serves: each prompt of a batch, n times; prompt tokens over the batch.
      const cost = {
        requests: size.prompts * size.n,
        tokens: computePromptTokens(parsed.value, input.tokens.length),
      };
      await enforceTenantLimits(s.limiter, s.metrics, tenant, cost, (name, value) => {
        headers[name] = value;
      });
    }
    // After the tenant's limits, so a request they refuse never wakes a Deployment.
    const route = await this.#untilRoutable(chosen, scope.signal);
    const stream = body['stream'] === true;
    const reuse =
      !stream && route.reuse.enabled && computeDeterminism(body, route.reuse.reusableWhen)
        ? await this.#claimReuse(req, route, salt, body, scope)
        : undefined;
    if (reuse?.kind === 'hit') return { kind: 'reused', headers, answer: reuse.answer };
    const ticket = reuse?.ticket;
    const sequences = size.prompts * size.n;
    const routed = { route, salt, body, input, stream, sequences, ...(exact ? { exact } : {}) };
    try {
      return { headers, ...(await this.#admitAndSelect(req, scope, routed, ticket)) };
    } catch (err) {
      await ticket?.fail();
      throw err;
    }
  }

  /** A free choice made in a burst waits until the peers' simultaneous picks reached this replica. */
  async #holdForPeers(sel: Selection, signal: AbortSignal): Promise<void> {
    const s = this.#s;
    const views = s.standing(sel.routable).map((e) => s.view(e, sel.cached.get(e.id)));
    const ms = sel.policy.holdMs?.(views, sel.input) ?? 0;
    if (ms > 0) await sleep(s.clock, ms, signal);
  }

  /** A Deployment waking from zero: held until the table shows it an endpoint (wake-hold.ts). */
  async #untilRoutable(chosen: ModelRoute, signal: AbortSignal): Promise<ModelRoute> {
    const { wakeHolds, table } = this.#s;
    if (!wakeHolds.holds(chosen)) return chosen;
    return wakeHolds.untilRoutable(
      chosen,
      () => table.candidates(chosen.model).find((r) => r.deployment === chosen.deployment),
      signal,
    );
  }

  async #claimReuse(
    req: PickRequest,
    route: ModelRoute,
    salt: string,
    body: Record<string, unknown>,
    scope: PickScope,
  ): Promise<ReuseStep> {
    const { reuser, metrics } = this.#s;
    const key = computeReuseKey({ fingerprint: route.fingerprint, salt, route: req.path, body });
    const span = scope.trace?.startReuse();
    const claim = await reuser.claim(key, route.reuse.ttlSeconds * 1000);
    if (claim.kind === 'hit') {
      span?.end(claim.source);
      metrics.reuse.inc({ model: route.model, source: claim.source });
      return { kind: 'hit', answer: buildReusedAnswer(claim.stored, claim.source) };
    }
    const ticket: ReuseTicket = {
      settle: async (stored) => {
        await claim.settle(stored);
        span?.end('fresh');
        metrics.reuse.inc({ model: route.model, source: 'fresh' });
      },
      fail: () => claim.fail(),
    };
    return { kind: 'miss', ticket };
  }

  /** Admitted (may wait in the queue), then the endpoint chosen with the load as it is then. */
  async #admitAndSelect(
    req: PickRequest,
    scope: PickScope,
    routed: Omit<Decision, 'target'>,
    reuse: ReuseTicket | undefined,
  ): Promise<Omit<Extract<PickResult, { kind: 'routed' }>, 'headers'>> {
    const s = this.#restrictTo(req.within);
    const { route, input, exact, salt } = routed;
    const permit = await admitRequest(s.admission, s.tier, s.metrics, route, {
      signal: scope.signal,
      priority: req.tenant?.priority ?? 0,
      weight: routed.sequences,
      trace: scope.trace,
    });
    try {
      s.followRoute(route);
      const policy = s.policies.policyFor(route, (e) => s.view(e));
      const match: MatchIndexed = exact
        ? (endpoints) => s.kvIndex.match(endpoints, exact, salt)
        : () => NO_MATCHES;
      const record = (
        endpoint: RouteEndpoint,
        decode: RouteEndpoint | undefined,
        attempt: number,
        cached: ReadonlyMap<string, KvMatch>,
        stamp: RuntimeStamp | undefined,
      ): void =>
        recordDecision(s.metrics, scope.log, {
          stamp,
          route,
          policy,
          endpoint,
          ...(decode ? { decode } : {}),
          input,
          indexed: cached.get(endpoint.id),
          queueMs: permit.queuedMs,
          attempt,
          trace: scope.trace,
        });
      const noEndpoint = (): GatewayError => new GatewayError('GW_NO_ENDPOINT', { model: route.model });
      // Stamped for the endpoint it goes to first: what that one must prefill of this prompt.
      const stamp = (
        b: Record<string, unknown>,
        endpoints: readonly RouteEndpoint[],
        cached: ReadonlyMap<string, KvMatch>,
      ): Stamped =>
        stampRuntimePriorityWithStamp(b, {
          endpoints,
          tenantPriority: req.tenant?.priority ?? 0,
          uncachedTokens: computeUncachedTokens(input.tokens.length, cached.get(endpoints[0]?.id ?? '')),
        });
      let target: Target;
      let body = routed.body;
      let repick: PickLease['repick'] = () => undefined;
      if (isDisaggregated(route)) {
        const pair = selectPair(s, route, policy, input, match);
        if (!pair) throw noEndpoint();
        const bootstrap = buildPairBootstrap(pair.prefill, computeBootstrapRoom(this.#random32));
        const stamped = stamp(buildPdBody(body, bootstrap), [pair.prefill, pair.decode], pair.cached);
        record(pair.prefill, pair.decode, 0, pair.cached, stamped.stamp);
        target = { kind: 'pair', prefill: pair.prefill, decode: pair.decode, bootstrap };
        body = stamped.body;
      } else {
        const sel = openSelection(route, policy, input, match);
        await this.#holdForPeers(sel, scope.signal);
        const endpoint = selectEndpoint(s, sel, []);
        if (!endpoint) throw noEndpoint();
        const fallbacks = req.fallbacks ? selectFallbacks(s, sel, endpoint, req.fallbacks) : [];
        const unstamped = body;
        const first = stamp(unstamped, [endpoint, ...fallbacks], sel.cached);
        record(endpoint, undefined, 0, sel.cached, first.stamp);
        // Its finishing KV store will tell its output length (kv-index/output-attribution.ts).
        const expectOutput = (e: RouteEndpoint): void => {
          if (exact) s.kvIndex.expectOutput(e.id, input.id, exact, salt, input.maxTokens);
        };
        expectOutput(endpoint);
        target = { kind: 'standalone', endpoint, fallbacks };
        body = first.body;
        // A retry is stamped anew for the endpoint it goes to (its own uncached part), or not at
        // all where that endpoint does not order by priority (mid-rollout).
        repick = (tried, attempt) => {
          const next = selectEndpoint(s, sel, tried);
          if (!next) return undefined;
          const retry = stamp(unstamped, [next], sel.cached);
          record(next, undefined, attempt, sel.cached, retry.stamp);
          expectOutput(next);
          return { endpoint: next, body: retry.body };
        };
      }
      return {
        kind: 'routed',
        verdict: { kind: 'admit', queuedMs: permit.queuedMs },
        decision: { ...routed, body, target },
        lease: buildLease(permit, policy, repick, reuse),
      };
    } catch (err) {
      permit.release(undefined);
      throw err;
    }
  }

  /** The shared state, its standing endpoints narrowed to those `within` admits (a subset hint). */
  #restrictTo(within: PickRequest['within']): PickerState {
    const s = this.#s;
    if (!within) return s;
    return { ...s, standing: (endpoints) => s.standing(endpoints).filter(within) };
  }

  /** The prompt's ids from the model's own tokenizer (for the KV index). */
  async #tokenizeForIndex(route: ModelRoute, parsed: ParsedBody): Promise<readonly number[] | undefined> {
    const tok = this.#s.tokenizers.get(route.model);
    const input = tok && computeTokenizerInput(parsed);
    return input ? encodeRequest(tok, input) : undefined;
  }

  /**
   * Tokenize only where a KV index can use the ids (an endpoint publishes events): elsewhere
   * approximate tokens serve the tree at no cost.
   */
  #indexesTokens(route: ModelRoute): boolean {
    return this.#s.tokenizers.has(route.model) && route.endpoints.some((e) => e.events);
  }
}

/** The route's salt (per tenant unless the route shares prefixes across tenants), then the client's own. */
function computeRequestSalt(
  route: ModelRoute,
  tenant: Tenant | undefined,
  clientSalt: string | undefined,
): string {
  const routeSalt =
    tenant && !route.sharePrefixesAcrossTenants ? computeTenantSalt(route.salt, tenant.id) : route.salt;
  return computeEffectiveSalt(routeSalt, clientSalt);
}

function buildLease(
  permit: Permit,
  policy: PickLease['policy'],
  repick: PickLease['repick'],
  reuse: ReuseTicket | undefined,
): PickLease {
  return {
    policy,
    release: (info) => permit.release(info),
    repick,
    ...(reuse ? { reuse } : {}),
  };
}
