// Measures each Deployment's cache off the reconcile loop, as the warm-up
// worker runs warm-ups: every period, while this operator leads, it reads the
// /metrics of every ready, verified, prefilling endpoint and every gateway
// replica's cache report, windows both sides' counters alike, assesses each
// Deployment (assess.ts), keeps the assessment in memory and queues a reconcile
// of the Deployments whose assessment changed; that reconcile writes it to
// status. Losing the memory (a restart, a new leader) only means measuring a
// window again; the verdict in status stands meanwhile (chooseCacheVerdict).
import type { DeploymentResource, GatewayCacheReport, GatewayEndpointEvents } from '#api';
import { findCondition } from '../../../manager/conditions.ts';
import type { Logger } from '#kube/logger.ts';
import { mapLimited } from '../../../manager/map-limited.ts';
import { LeaderPeriodicWorker } from '../../../manager/periodic.ts';
import { formatKey, type ObjectKey } from '#kube/objects.ts';
import { fetchMetricsText } from '../../../sglang-client/client.ts';
import { buildEndpointUrl } from '#sglang/endpoint-url.ts';
import {
  assessCacheHealth,
  type CacheHealthAssessment,
  type EndpointCacheObservation,
  type EndpointEventsView,
  type GatewayObservation,
} from './assess.ts';
import { readGatewayTier, type ReplicaRead } from '../../../gateway-client/tier.ts';
import { parseRuntimeCacheSample, type HostTier } from './runtime-sample.ts';
import { CounterWindow } from './window.ts';

export const DEFAULT_CACHE_HEALTH_WINDOW_MS = 300_000;
const SCRAPE_TIMEOUT_MS = 3_000;
const SCRAPES_AT_ONCE = 8;

export interface CacheHealthProberOptions {
  /** The Deployments as the informer holds them. */
  deployments: () => readonly DeploymentResource[];
  /** Only the leader measures (and its reconciles are the only ones that write). */
  isLeader: () => boolean;
  /** A Deployment's assessment changed: queue it for reconcile. */
  onChanged: (key: ObjectKey) => void;
  periodMs: number;
  windowMs?: number;
  /** The gateway's admin address (http://HOST:PORT); unset: runtime figures only. */
  gatewayAdminUrl?: string | undefined;
  logger: Logger;
  signal: AbortSignal;
  now?: () => number;
}

interface EndpointState {
  window: CounterWindow;
  host: HostTier | undefined;
  scrapeError: string | undefined;
  /** When the gateway first said its event index is unusable, in this run of unusable reports. */
  unusableSince: number | undefined;
}

/** One gateway replica, by address: its counters per Deployment and its last view of the endpoints' events. */
interface ReplicaState {
  instance: string;
  windows: Map<string, CounterWindow>;
  /** By namespace/pod, from its last report read. */
  events: Map<string, GatewayEndpointEvents>;
  readAt: number;
}

/** The endpoints whose prefix cache routing aims at: ready, verified, prefilling. */
function prefillingEndpoints(d: DeploymentResource) {
  return (d.status?.endpoints ?? []).filter((e) => e.ready && e.verified && e.role !== 'decode');
}

/** Of two replicas' views of one endpoint, the one that should worry a person more. */
export function worseEvents(a: GatewayEndpointEvents, b: GatewayEndpointEvents): GatewayEndpointEvents {
  if (a.usable !== b.usable) return a.usable ? b : a;
  return (b.lagMs ?? -1) > (a.lagMs ?? -1) ? b : a;
}

export class CacheHealthProber extends LeaderPeriodicWorker {
  readonly #opts: CacheHealthProberOptions;
  readonly #windowMs: number;
  readonly #now: () => number;
  readonly #endpoints = new Map<string, EndpointState>();
  readonly #replicas = new Map<string, ReplicaState>();
  readonly #assessments = new Map<string, CacheHealthAssessment>();
  #tierError: string | undefined;

  constructor(opts: CacheHealthProberOptions) {
    super({ ...opts, what: 'cache health pass' });
    this.#opts = opts;
    this.#windowMs = opts.windowMs ?? DEFAULT_CACHE_HEALTH_WINDOW_MS;
    this.#now = opts.now ?? Date.now;
  }

  /** The last assessment of a Deployment; undefined before its first pass. */
  assessmentOf(key: ObjectKey): CacheHealthAssessment | undefined {
    return this.#assessments.get(formatKey(key));
  }

  protected override forget(): void {
    this.#endpoints.clear();
    this.#replicas.clear();
    this.#assessments.clear();
  }

  /** One pass over every Deployment. */
  protected override async lead(): Promise<void> {
    const deployments = this.#opts.deployments();
    const signal = this.#opts.signal;
    const targets = deployments.flatMap((d) =>
      prefillingEndpoints(d).map((e) => ({
        key: `${d.metadata.namespace ?? ''}/${e.pod}`,
        url: buildEndpointUrl(e.ip, e.port),
      })),
    );
    await Promise.all([
      this.#readTier(),
      mapLimited(targets, SCRAPES_AT_ONCE, async (t) => this.#scrape(t.key, t.url)),
    ]);
    if (signal.aborted) return;
    const live = new Set(targets.map((t) => t.key));
    for (const key of this.#endpoints.keys()) if (!live.has(key)) this.#endpoints.delete(key);

    const events = this.#freshEvents();
    const seen = new Set<string>();
    for (const d of deployments) {
      const key = { namespace: d.metadata.namespace ?? '', name: d.metadata.name ?? '' };
      const id = formatKey(key);
      seen.add(id);
      const prev = this.#assessments.get(id);
      // After a restart, the verdict in status is the previous one (chooseCacheVerdict keeps it).
      const previousReason =
        prev?.condition.reason ?? findCondition(d.status?.conditions, 'CacheHealthy')?.reason;
      const next = this.#assess(d, events, previousReason);
      this.#assessments.set(id, next);
      if (JSON.stringify(prev) !== JSON.stringify(next)) this.#opts.onChanged(key);
    }
    for (const id of this.#assessments.keys()) if (!seen.has(id)) this.#assessments.delete(id);
  }

  async #scrape(key: string, baseUrl: string): Promise<void> {
    const state = this.#endpoints.get(key) ?? {
      window: new CounterWindow(this.#windowMs),
      host: undefined,
      scrapeError: undefined,
      unusableSince: undefined,
    };
    this.#endpoints.set(key, state);
    const text = await fetchMetricsText(baseUrl, { timeoutMs: SCRAPE_TIMEOUT_MS, signal: this.#opts.signal });
    const sample = text.ok ? parseRuntimeCacheSample(text.value) : undefined;
    const now = this.#now();
    if (sample) {
      state.window.add(now, { total: sample.promptTokens, part: sample.cachedTokens });
      state.host = sample.host;
      state.scrapeError = undefined;
      return;
    }
    state.window.expire(now);
    state.scrapeError = !text.ok
      ? `${text.error} (the runtime's NetworkPolicy must admit the operator: --runtime-ingress-operator)`
      : 'no sglang: metric in /metrics (is the runtime started with --enable-metrics?)';
  }

  /** Reads every replica; a replica's counters are windowed apart, a restarted one (new instance) starts again. */
  async #readTier(): Promise<void> {
    if (!this.#opts.gatewayAdminUrl) return;
    const tier = await readGatewayTier(this.#opts.gatewayAdminUrl, {
      timeoutMs: SCRAPE_TIMEOUT_MS,
      signal: this.#opts.signal,
    });
    const now = this.#now();
    const reads: ReplicaRead[] = tier.ok ? tier.replicas : [];
    for (const read of reads) if (read.ok) this.#recordReplica(read.address, read.report, now);
    // A replica gone from DNS, or not answering, keeps its windows until they expire.
    for (const r of this.#replicas.values())
      if (r.readAt < now) for (const w of r.windows.values()) w.expire(now);
    for (const [address, r] of this.#replicas)
      if ([...r.windows.values()].every((w) => w.delta() === undefined) && now - r.readAt > this.#windowMs)
        this.#replicas.delete(address);
    const failed = tier.ok ? reads.flatMap((r) => (r.ok ? [] : [r.error])) : [tier.error];
    this.#tierError = reads.some((r) => r.ok) ? undefined : (failed[0] ?? 'no gateway replica');
    if (this.#tierError) this.#opts.logger.debug('gateway cache report unread', { error: this.#tierError });
  }

  #recordReplica(address: string, report: GatewayCacheReport, now: number): void {
    let state = this.#replicas.get(address);
    if (!state || state.instance !== report.instance) {
      state = { instance: report.instance, windows: new Map(), events: new Map(), readAt: now };
      this.#replicas.set(address, state);
    }
    state.readAt = now;
    state.events = new Map();
    for (const d of report.deployments) {
      const window = state.windows.get(d.deployment) ?? new CounterWindow(this.#windowMs);
      state.windows.set(d.deployment, window);
      window.add(now, { total: d.promptTokens, part: d.predictedTokens });
      const namespace = d.deployment.split('/')[0] ?? '';
      for (const e of d.endpoints) if (e.events) state.events.set(`${namespace}/${e.pod}`, e.events);
    }
  }

  /** Each endpoint's events, the worst view among replicas read in the last two periods. */
  #freshEvents(): Map<string, GatewayEndpointEvents> | undefined {
    const now = this.#now();
    const fresh = [...this.#replicas.values()].filter((r) => now - r.readAt <= 2 * this.#opts.periodMs);
    if (fresh.length === 0) return undefined;
    const out = new Map<string, GatewayEndpointEvents>();
    for (const r of fresh)
      for (const [pod, e] of r.events) {
        const seen = out.get(pod);
        out.set(pod, seen ? worseEvents(seen, e) : e);
      }
    return out;
  }

  /** `events` undefined: the gateway was not read lately; the endpoints' event runs are left as they are. */
  #eventsView(
    state: EndpointState,
    events: Map<string, GatewayEndpointEvents> | undefined,
    key: string,
  ): EndpointEventsView | undefined {
    if (!events) return undefined;
    const reported = events.get(key);
    if (!reported || reported.usable) {
      state.unusableSince = undefined;
      return reported ? { usable: true, reason: reported.reason, unusableForMs: 0 } : undefined;
    }
    state.unusableSince ??= this.#now();
    return { usable: false, reason: reported.reason, unusableForMs: this.#now() - state.unusableSince };
  }

  #gatewayObservation(deployment: string): GatewayObservation {
    if (!this.#opts.gatewayAdminUrl) return { kind: 'off' };
    let promptTokens = 0;
    let predictedTokens = 0;
    let measured = false;
    for (const r of this.#replicas.values()) {
      const delta = r.windows.get(deployment)?.delta();
      if (!delta) continue;
      measured = true;
      promptTokens += delta.total;
      predictedTokens += delta.part;
    }
    if (measured) return { kind: 'read', prediction: { promptTokens, predictedTokens } };
    if (this.#tierError) return { kind: 'unreachable', error: this.#tierError };
    return { kind: 'read', prediction: undefined };
  }

  #assess(
    d: DeploymentResource,
    events: Map<string, GatewayEndpointEvents> | undefined,
    previousReason: string | undefined,
  ): CacheHealthAssessment {
    const ns = d.metadata.namespace ?? '';
    const endpoints = prefillingEndpoints(d).map((e): EndpointCacheObservation => {
      const key = `${ns}/${e.pod}`;
      const state = this.#endpoints.get(key);
      const delta = state?.window.delta();
      return {
        pod: e.pod,
        delta: delta
          ? { promptTokens: delta.total, cachedTokens: delta.part, seconds: delta.seconds }
          : undefined,
        host: state?.host,
        scrapeError: state?.scrapeError,
        events: state ? this.#eventsView(state, events, key) : undefined,
      };
    });
    return assessCacheHealth({
      windowSeconds: Math.round(this.#windowMs / 1000),
      endpoints,
      gateway: this.#gatewayObservation(`${ns}/${d.metadata.name ?? ''}`),
      hostTierField: d.spec.disaggregation ? 'spec.disaggregation.prefill.hicache' : 'spec.hicache',
      previousReason,
    });
  }
}
