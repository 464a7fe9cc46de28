// Measures each Deployment's cache off the reconcile loop, as the warm-up
// worker runs warm-ups: every period, while this operator leads, it reads the
// /metrics of every ready, verified, prefilling endpoint and the gateway tier's
// cache report, assesses each Deployment (assess.ts), keeps the assessment in
// memory and queues a reconcile of the Deployments whose assessment changed;
// that reconcile writes it to status. Losing the memory (a restart, a new
// leader) only means measuring a window again.
import type { DeploymentResource, GatewayEndpointEvents } from '../../../api/index.ts';
import type { Logger } from '../../../runtime/logger.ts';
import { formatKey, type ObjectKey } from '../../../runtime/objects.ts';
import { fetchMetricsText } from '../../../sglang/client.ts';
import {
  assessCacheHealth,
  type CacheHealthAssessment,
  type EndpointCacheObservation,
  type EndpointEventsView,
  type GatewayObservation,
} from './assess.ts';
import { readGatewayTier, type TierRead } from './gateway-report.ts';
import { parseRuntimeCacheSample } from './runtime-sample.ts';
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
  scrapeError: string | undefined;
  /** When the gateway first said its event index is unusable, in this run of unusable reports. */
  unusableSince: number | undefined;
}

/** The endpoints whose prefix cache routing aims at: ready, verified, prefilling. */
function prefillingEndpoints(d: DeploymentResource) {
  return (d.status?.endpoints ?? []).filter((e) => e.ready && e.verified && e.role !== 'decode');
}

async function mapLimited<T>(
  items: readonly T[],
  limit: number,
  fn: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const item = items[next++] as T;
      await fn(item);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

export class CacheHealthProber {
  readonly #opts: CacheHealthProberOptions;
  readonly #windowMs: number;
  readonly #now: () => number;
  readonly #endpoints = new Map<string, EndpointState>();
  readonly #assessments = new Map<string, CacheHealthAssessment>();
  #timer: NodeJS.Timeout | undefined;
  #busy = false;

  constructor(opts: CacheHealthProberOptions) {
    this.#opts = opts;
    this.#windowMs = opts.windowMs ?? DEFAULT_CACHE_HEALTH_WINDOW_MS;
    this.#now = opts.now ?? Date.now;
    opts.signal.addEventListener('abort', () => this.stop(), { once: true });
  }

  start(): void {
    if (this.#timer || this.#opts.signal.aborted) return;
    this.#timer = setInterval(() => void this.#tick(), this.#opts.periodMs);
    this.#timer.unref();
  }

  async #tick(): Promise<void> {
    // A slow pass (many endpoints, a hung gateway) is not overlapped by the next.
    if (this.#busy) return;
    this.#busy = true;
    try {
      await this.probe();
    } catch (err) {
      this.#opts.logger.error('cache health pass failed', { error: (err as Error).message });
    } finally {
      this.#busy = false;
    }
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** The last assessment of a Deployment; undefined before its first pass. */
  assessmentOf(key: ObjectKey): CacheHealthAssessment | undefined {
    return this.#assessments.get(formatKey(key));
  }

  /** One pass over every Deployment (the timer's; tests call it directly). */
  async probe(): Promise<void> {
    if (!this.#opts.isLeader()) {
      this.#endpoints.clear();
      this.#assessments.clear();
      return;
    }
    const deployments = this.#opts.deployments();
    const signal = this.#opts.signal;
    const targets = deployments.flatMap((d) =>
      prefillingEndpoints(d).map((e) => ({
        key: `${d.metadata.namespace ?? ''}/${e.pod}`,
        url: `http://${e.ip}:${e.port}`,
      })),
    );
    const [tier] = await Promise.all([
      this.#opts.gatewayAdminUrl
        ? readGatewayTier(this.#opts.gatewayAdminUrl, { timeoutMs: SCRAPE_TIMEOUT_MS, signal })
        : undefined,
      mapLimited(targets, SCRAPES_AT_ONCE, async (t) => this.#scrape(t.key, t.url)),
    ]);
    if (signal.aborted) return;
    const live = new Set(targets.map((t) => t.key));
    for (const key of this.#endpoints.keys()) if (!live.has(key)) this.#endpoints.delete(key);
    if (tier && !tier.ok) this.#opts.logger.debug('gateway cache report unread', { error: tier.error });

    const seen = new Set<string>();
    for (const d of deployments) {
      const key = { namespace: d.metadata.namespace ?? '', name: d.metadata.name ?? '' };
      const id = formatKey(key);
      seen.add(id);
      const next = this.#assess(d, tier);
      const prev = this.#assessments.get(id);
      this.#assessments.set(id, next);
      if (JSON.stringify(prev) !== JSON.stringify(next)) this.#opts.onChanged(key);
    }
    for (const id of this.#assessments.keys()) if (!seen.has(id)) this.#assessments.delete(id);
  }

  async #scrape(key: string, baseUrl: string): Promise<void> {
    const state = this.#endpoints.get(key) ?? {
      window: new CounterWindow(this.#windowMs),
      scrapeError: undefined,
      unusableSince: undefined,
    };
    this.#endpoints.set(key, state);
    const text = await fetchMetricsText(baseUrl, { timeoutMs: SCRAPE_TIMEOUT_MS, signal: this.#opts.signal });
    const sample = text.ok ? parseRuntimeCacheSample(text.value) : undefined;
    if (sample) state.window.add(this.#now(), sample);
    state.scrapeError = !text.ok
      ? text.error
      : sample
        ? undefined
        : 'no sglang: metric in /metrics (is the runtime started with --enable-metrics?)';
  }

  #eventsView(
    state: EndpointState,
    reported: GatewayEndpointEvents | undefined,
  ): EndpointEventsView | undefined {
    if (!reported) {
      state.unusableSince = undefined;
      return undefined;
    }
    if (reported.usable) state.unusableSince = undefined;
    else state.unusableSince ??= this.#now();
    return {
      usable: reported.usable,
      reason: reported.reason,
      unusableForMs: state.unusableSince === undefined ? 0 : this.#now() - state.unusableSince,
    };
  }

  #assess(d: DeploymentResource, tier: TierRead | undefined): CacheHealthAssessment {
    const ns = d.metadata.namespace ?? '';
    const endpoints = prefillingEndpoints(d).map((e): EndpointCacheObservation => {
      const state = this.#endpoints.get(`${ns}/${e.pod}`);
      const reported = tier?.ok ? tier.value.events.get(`${ns}/${e.pod}`) : undefined;
      return {
        pod: e.pod,
        delta: state?.window.delta(),
        host: state?.window.latest()?.host,
        scrapeError: state?.scrapeError,
        events: state ? this.#eventsView(state, reported) : undefined,
      };
    });
    const gateway: GatewayObservation = !tier
      ? { kind: 'off' }
      : !tier.ok
        ? { kind: 'unreachable', error: tier.error }
        : { kind: 'read', prediction: tier.value.predictions.get(`${ns}/${d.metadata.name ?? ''}`) };
    return assessCacheHealth({
      windowSeconds: Math.round(this.#windowMs / 1000),
      endpoints,
      gateway,
      hostTierField: d.spec.disaggregation ? 'spec.disaggregation.prefill.hicache' : 'spec.hicache',
    });
  }
}
