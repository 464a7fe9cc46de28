// The simulator's KV and load event publishing, wired as SGLang 0.5.23's
// scheduler does (managers/scheduler.py, scheduler_components/
// kv_events_publisher.py, metrics_reporter.py):
//
// - the radix tree's stores, removals and clears are recorded (device tier
//   as medium "GPU", the HiCache host tier as "CPU_PINNED");
// - the queue is taken and published as one batch after every prefill step,
//   after every --decode-log-interval-th decode step (40) and whenever the
//   engine falls idle (a /flush_cache included); an empty queue publishes
//   nothing;
// - the cache's construction records AllBlocksCleared, which the first idle
//   pass publishes: a fresh server's first batch (seq 0);
// - with --load-publish-endpoint, a LoadStat after every step (decode steps
//   throttled by --load-snapshot-publish-interval, 15) and a heartbeat.
//
// One DP rank (the simulator has one scheduler): rank 0's sockets only.

import { readDecodeLogInterval, type SimConfig } from './config.ts';
import type { Engine, EngineStepKind } from './engine.ts';
import { encodeEventBatch, type LoadStat } from './kv-event-codec.ts';
import { ZmqEventPublisher } from './kv-event-publisher.ts';
import { KvEventRecorder } from './kv-event-recorder.ts';
import { randomBytes } from 'node:crypto';
import { StorageMedium, type KvCacheEvent } from '#sglang/kv-events.ts';
import {
  describeKvEvents,
  parseKvEventsConfig,
  parseTcpEndpoint,
  resolveLoadRange,
  shouldBind,
  type KvEventsConfig,
  type KvEventsDescriptor,
} from './kv-events-config.ts';
import { parseNamespace } from './generation.ts';
import { LOAD_PUBLISH_HEARTBEAT_MS, LoadPublisher, LoadThrottle } from './load-publisher.ts';
import type { RadixTree, TreeNode } from './radix-tree.ts';

const DEFAULT_LOAD_SNAPSHOT_PUBLISH_INTERVAL = 15;
const ATTN_DP_RANK = 0;

export interface KvEventsServiceDeps {
  /** Wall clock, ms since the epoch: batch timestamps (SGLang's time.time()). */
  readonly wallNow?: () => number;
  /** Monotonic ms: the load heartbeat (SGLang's time.monotonic()). */
  readonly monotonicNow?: () => number;
}

function intFlag(config: SimConfig, dest: string, fallback: number): number {
  const v = config.sglang[dest];
  return typeof v === 'number' && Number.isInteger(v) ? v : fallback;
}

/** The event sockets' bound addresses (tcp://host:port as libzmq reports them); null when not bound. */
export interface BoundEventEndpoints {
  readonly kv: string | null;
  readonly replay: string | null;
  readonly load: string | null;
}

export class KvEventsService {
  readonly #configured: KvEventsDescriptor | null;
  readonly #bindHost: string | null;
  readonly #ephemeralPorts: boolean;
  readonly #cfg: KvEventsConfig;
  readonly #engine: Engine;
  readonly #recorder: KvEventRecorder<TreeNode> | null;
  readonly #decodeLogInterval: number;
  readonly #loadEndpoint: string | null;
  readonly #throttle: LoadThrottle;
  readonly #wallNow: () => number;
  readonly #monotonicNow: () => number;
  #publisher: ZmqEventPublisher | null = null;
  #loadPublisher: LoadPublisher | null = null;
  #heartbeat: NodeJS.Timeout | null = null;
  #decodeSteps = 0;
  #idleRepublish: NodeJS.Immediate | null = null;
  readonly #floodBlocks: number;

  /** The service for a launch, or null without --kv-events-config; throws where SGLang refuses to start. */
  static build(config: SimConfig, engine: Engine, deps: KvEventsServiceDeps = {}): KvEventsService | null {
    const raw = config.sglang.kv_events_config;
    if (raw === null || raw === '') {
      if ((config.sglang.load_publish_endpoint ?? 'off').trim().toLowerCase() !== 'off') {
        throw new Error('--load-publish-endpoint requires --kv-events-config');
      }
      return null;
    }
    const parsed = parseKvEventsConfig(raw);
    if (!parsed.ok) throw new Error(parsed.error);
    return new KvEventsService(config, parsed.value, engine, deps);
  }

  private constructor(config: SimConfig, cfg: KvEventsConfig, engine: Engine, deps: KvEventsServiceDeps) {
    this.#cfg = cfg;
    this.#bindHost = config.sim.bindHost;
    this.#ephemeralPorts = config.sim.ephemeralEventPorts;
    this.#engine = engine;
    this.#wallNow = deps.wallNow ?? Date.now;
    this.#monotonicNow = deps.monotonicNow ?? (() => performance.now());
    const ec = engine.config;
    const dpSize = config.sglang.dp_size;
    const loadEndpoint = config.sglang.load_publish_endpoint;
    const described = describeKvEvents(cfg, {
      pageSize: ec.pageSize,
      dpSize,
      loadPublishEndpoint: loadEndpoint,
    });
    // --sim-report-dp-size: a hostile runtime lies about its ranks; its sockets stay rank 0's.
    const lie = config.sim.reportDpSize;
    this.#configured = described && lie > 0 ? { ...described, dp_size: lie } : described;
    this.#floodBlocks = config.sim.floodBlocks;
    const { range, reason } = resolveLoadRange(cfg.publisher === 'null' ? null : cfg, dpSize, loadEndpoint);
    if (reason !== null) throw new Error(reason);
    this.#loadEndpoint = range ? `tcp://${formatHost(range.host)}:${range.base + ATTN_DP_RANK}` : null;
    this.#decodeLogInterval = Math.max(1, readDecodeLogInterval(config.sglang));
    this.#throttle = new LoadThrottle(
      intFlag(config, 'load_snapshot_publish_interval', DEFAULT_LOAD_SNAPSHOT_PUBLISH_INTERVAL),
    );
    // A disabled radix cache reports no KV events (SGLang builds it with events off).
    this.#recorder =
      cfg.publisher === 'zmq' && ec.radixCache ? recordTreeEvents(engine.tree, ec.pageSize) : null;
    // The cache's construction resets it, as SGLang's does.
    this.#recorder?.recordAllCleared();
    engine.onStep = (kind) => this.#onStep(kind);
  }

  /** Open the sockets and publish the startup batch. */
  async open(): Promise<void> {
    if (this.#cfg.publisher === 'zmq') {
      const endpoint = this.#cfg.endpoint;
      const bind = shouldBind(this.#cfg, endpoint);
      this.#publisher = await ZmqEventPublisher.open({
        // A connecting PUB goes where it is told: only a bound socket's port is the kernel's pick.
        endpoint: bind ? this.#bindAddress(endpoint) : this.#onBindHost(endpoint),
        bind,
        replayEndpoint:
          this.#cfg.replay_endpoint === null ? null : this.#bindAddress(this.#cfg.replay_endpoint),
        bufferSteps: this.#cfg.buffer_steps,
        hwm: this.#cfg.hwm,
        topic: this.#cfg.topic,
      });
    }
    if (this.#loadEndpoint !== null) {
      this.#loadPublisher = await LoadPublisher.open(this.#bindAddress(this.#loadEndpoint));
      this.#heartbeat = setInterval(() => this.#publishLoad(true), LOAD_PUBLISH_HEARTBEAT_MS);
      this.#heartbeat.unref();
    }
    this.#onStep('idle');
  }

  /**
   * /server_info's kv_events: as configured, or, with --sim-ephemeral-event-ports, the
   * ports bound (rank 0's, so each is its range's base).
   */
  get descriptor(): KvEventsDescriptor | null {
    const d = this.#configured;
    if (d === null || !this.#ephemeralPorts) return d;
    const { kv, replay, load } = this.bound;
    return {
      ...d,
      ...(kv === null ? {} : { endpoint_port_base: portOf(kv) }),
      ...(load === null || d.load_endpoint_port_base === undefined
        ? {}
        : { load_endpoint_port_base: portOf(load) }),
      ...(replay === null || d.replay_endpoint_port_base === undefined
        ? {}
        : { replay_endpoint_port_base: portOf(replay) }),
    };
  }

  /** Where a socket binds: on --sim-bind-host, and on port 0 with --sim-ephemeral-event-ports. */
  #bindAddress(endpoint: string): string {
    const address = this.#onBindHost(endpoint);
    return this.#ephemeralPorts ? address.replace(/^(tcp:\/\/.+):\d+$/, '$1:0') : address;
  }

  /** A wildcard-host endpoint on --sim-bind-host, when set (the advertised endpoints stay wildcards). */
  #onBindHost(endpoint: string): string {
    if (this.#bindHost === null) return endpoint;
    return endpoint.replace(
      /^tcp:\/\/(\*|0\.0\.0\.0|\[::\])(?=:\d+$)/,
      `tcp://${formatHost(this.#bindHost)}`,
    );
  }

  /** Where the sockets are bound, as libzmq reports them (with --sim-ephemeral-event-ports, the kernel's picks). */
  get bound(): BoundEventEndpoints {
    return {
      kv: this.#publisher?.boundEndpoint ?? null,
      replay: this.#publisher?.boundReplayEndpoint ?? null,
      load: this.#loadPublisher?.boundEndpoint ?? null,
    };
  }

  /** KV event batches sent so far (the next batch's sequence number). */
  get sentBatches(): number {
    return this.#publisher?.nextSeq ?? 0;
  }

  /** Resolves once every batch published so far is on its way. */
  flushed(): Promise<void> {
    return this.#publisher?.flushed() ?? Promise.resolve();
  }

  async close(): Promise<void> {
    if (this.#heartbeat) clearInterval(this.#heartbeat);
    if (this.#idleRepublish) clearImmediate(this.#idleRepublish);
    this.#heartbeat = null;
    this.#loadPublisher?.close();
    await this.#publisher?.closed();
  }

  #onStep(kind: EngineStepKind): void {
    this.#publishLoad(kind !== 'decode');
    if (kind === 'decode') {
      this.#decodeSteps = (this.#decodeSteps + 1) % 2 ** 30;
      if (this.#decodeSteps % this.#decodeLogInterval !== 0) return;
    }
    this.#publishKvEvents(kind);
  }

  #publishKvEvents(kind: EngineStepKind): void {
    const recorder = this.#recorder;
    if (!recorder || !this.#publisher) return;
    const events = recorder.take();
    if (events.length > 0 && this.#floodBlocks > 0)
      events.push(buildFloodEvent(this.#floodBlocks, this.#engine.config.pageSize));
    if (events.length > 0)
      this.#publisher.publish(encodeEventBatch(this.#wallNow() / 1000, events, ATTN_DP_RANK));
    // Write-through copies started in this step are acknowledged by the next scheduler pass: the
    // next publish point, or, on an idle server, its next idle pass.
    recorder.releaseDeferred();
    if (kind === 'idle' && recorder.pending > 0 && !this.#idleRepublish) {
      this.#idleRepublish = setImmediate(() => {
        this.#idleRepublish = null;
        this.#publishKvEvents('idle');
      });
    }
  }

  #publishLoad(force: boolean): void {
    if (!this.#loadPublisher) return;
    const stat = this.#loadStat();
    if (this.#throttle.admit(stat, force, this.#monotonicNow())) this.#loadPublisher.publish(stat);
  }

  #loadStat(): LoadStat {
    const s = this.#engine.snapshot();
    // SGLang's num_used_tokens leaves out what the radix cache could evict (0 on an idle server): the snapshot's already does.
    const used = s.numUsedTokens;
    const waiting = this.#engine.waitingPromptTokens;
    const c = s.counters;
    return {
      numRunningReqs: s.numRunningReqs,
      numWaitingReqs: s.numWaitingReqs,
      numTokens: used,
      maxTotalNumTokens: s.maxTotalNumTokens,
      attnDpRank: ATTN_DP_RANK,
      // SGLang's estimate when the queue is not prefix-matched: the recent miss rate.
      numWaitingUncachedTokens: Math.floor(waiting * (1 - s.cacheHitRate)),
      numTotalTokens: used + waiting,
      maxRunningRequests: this.#engine.config.maxRunningRequests,
      totalPrefillUncachedTokens: c.promptTokens - c.cachedTokens,
      totalPrefillBusyUs: Math.floor(c.prefillBusyMs * 1000),
    };
  }
}

/** --sim-flood-blocks: `blocks` random hashes stored under no parent, pages it never cached. */
function buildFloodEvent(blocks: number, blockSize: number): KvCacheEvent {
  const hashes = randomBytes(blocks * 8);
  return {
    type: 'BlockStored',
    blockHashes: Array.from({ length: blocks }, (_, i) => hashes.readBigInt64BE(i * 8)),
    parentBlockHash: null,
    tokenIds: [],
    blockSize,
    loraId: null,
    medium: StorageMedium.gpu,
    cacheSalt: null,
  };
}

/** A recorder of `tree`'s KV events: device tier as "GPU", host tier as "CPU_PINNED", salts from the namespaces. */
export function recordTreeEvents(tree: RadixTree, pageSize: number): KvEventRecorder<TreeNode> {
  const recorder = new KvEventRecorder<TreeNode>({
    pageSize,
    saltOf: (root) => parseNamespace(tree.namespaceOf(root)).cacheSalt,
  });
  tree.observer = {
    onStored: (node, tier, copying) =>
      copying ? recorder.deferStore(node, toMedium(tier)) : recorder.recordStore(node, toMedium(tier)),
    onRemoved: (node, tier) => recorder.recordRemove(node, toMedium(tier)),
    onCleared: () => recorder.recordAllCleared(),
  };
  return recorder;
}

function toMedium(tier: 'device' | 'host'): StorageMedium {
  return tier === 'device' ? StorageMedium.gpu : StorageMedium.cpuPinned;
}

/** The port of a tcp://host:port address libzmq reported. */
function portOf(endpoint: string): number {
  const port = /:(\d+)$/.exec(endpoint)?.[1];
  if (port === undefined) throw new Error(`libzmq reported an address without a port: ${endpoint}`);
  return Number(port);
}

function formatHost(host: string): string {
  return parseTcpEndpoint(`tcp://${host}:1`) ? host : `[${host}]`;
}
