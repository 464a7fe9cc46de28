// Simulator configuration: SGLang's own launch flags (lib/sglang/flags.ts)
// plus simulator-only flags, all prefixed `--sim-`. Pure.
//
// Defaults of the latency model describe an 8B model (Llama-3.1-8B, bf16) on
// one H100/H200-class GPU:
// - prefill 8,000 tokens/s and decode 6 ms + 0.35 ms per running request a
//   step: the figures of SGLang's router mock worker in its realistic mode
//   (lightseekorg/smg crates/mock_worker/README.md: --prefill-tps 8000
//   --decode-base-ms 6 --decode-per-req-ms 0.35 --max-running 256).
// - KV pool 413,000 tokens: 128 KiB of KV a token (2 x 32 layers x 8 KV heads
//   x 128 dims x 2 bytes), 80 GB x 0.88 static fraction - 16 GB of weights.
// - host->device load 200,000 tokens/s: 128 KiB a token over ~25 GB/s of
//   effective PCIe bandwidth, 25x faster than recomputing the prefill.
// - HiCache L3 (`file` backend) load: L3_LOAD_TPS_DEFAULT, from the real server's
//   measured cost of an L3 hit against a miss (docs/l3-timing.md).

import { parseSglangArgs, type ParsedSglangArgs, type Result, type SglangArgs } from '#sglang/flags.ts';
import { SGLANG_VERSION } from '#sglang/catalogue.ts';
import { checkSglangArgs } from '#sglang/startup-checks.ts';
import type { EngineConfig } from './engine.ts';
import {
  resolveSchedulePolicy,
  type PriorityScheduling,
  type SchedulePolicyName,
} from './schedule-policy.ts';
import { openL3Store, resolveL3Directory } from './l3-store.ts';

export interface SimOptions {
  readonly prefillTps: number;
  readonly decodeBaseMs: number;
  readonly decodePerReqMs: number;
  readonly hostLoadTps: number;
  /** HiCache L3 (`file` backend) load rate, tokens/s: read into host memory, then loaded. */
  readonly l3LoadTps: number;
  readonly timeScale: number;
  readonly failFirst: number;
  readonly unhealthyForMs: number;
  readonly latencySpikeMs: number;
  readonly latencySpikeEvery: number;
  readonly crashAfter: number;
  readonly hang: boolean;
  readonly version: string;
  /** Serve only the legacy /get_server_info and /get_model_info paths, like older 0.5.x. */
  readonly legacyInfoOnly: boolean;
  readonly pdTimeoutMs: number;
  /** Reported in the x-sim-worker header; defaults to host:port. */
  readonly workerId: string | null;
  /**
   * Bind wildcard-host event sockets (tcp://*:PORT) on this address instead: simulators
   * of many pods share one network namespace, where a real pod has its own.
   */
  readonly bindHost: string | null;
  /**
   * Bind the KV, replay and load event sockets on ports the kernel picks (each endpoint's
   * port taken as 0) and advertise the bound ones: tests read ports back, never guess free ones.
   */
  readonly ephemeralEventPorts: boolean;
  readonly defaultMaxTotalTokens: number;
  readonly defaultMaxRunningRequests: number;
  readonly contextLength: number;
  /**
   * A hostile runtime: /server_info's kv_events.dp_size says this instead of --dp-size
   * (0: the truth). The gateway must hold it to the Deployment's spec.
   */
  readonly reportDpSize: number;
  /** A hostile runtime: every KV event batch also stores this many blocks it never cached. */
  readonly floodBlocks: number;
}

export interface SimConfig {
  readonly sglang: SglangArgs;
  readonly explicit: ParsedSglangArgs['explicit'];
  readonly sim: SimOptions;
}

type SimKey = keyof SimOptions;
interface SimFlag {
  readonly key: SimKey;
  readonly type: 'number' | 'int' | 'bool' | 'string';
}

const SIM_FLAGS: Readonly<Record<string, SimFlag>> = {
  '--sim-prefill-tps': { key: 'prefillTps', type: 'number' },
  '--sim-decode-base-ms': { key: 'decodeBaseMs', type: 'number' },
  '--sim-decode-per-req-ms': { key: 'decodePerReqMs', type: 'number' },
  '--sim-host-load-tps': { key: 'hostLoadTps', type: 'number' },
  '--sim-l3-load-tps': { key: 'l3LoadTps', type: 'number' },
  '--sim-time-scale': { key: 'timeScale', type: 'number' },
  '--sim-fail-first': { key: 'failFirst', type: 'int' },
  '--sim-unhealthy-for-ms': { key: 'unhealthyForMs', type: 'number' },
  '--sim-latency-spike-ms': { key: 'latencySpikeMs', type: 'number' },
  '--sim-latency-spike-every': { key: 'latencySpikeEvery', type: 'int' },
  '--sim-crash-after': { key: 'crashAfter', type: 'int' },
  '--sim-hang': { key: 'hang', type: 'bool' },
  '--sim-version': { key: 'version', type: 'string' },
  '--sim-legacy-info-only': { key: 'legacyInfoOnly', type: 'bool' },
  '--sim-pd-timeout-ms': { key: 'pdTimeoutMs', type: 'number' },
  '--sim-worker-id': { key: 'workerId', type: 'string' },
  '--sim-bind-host': { key: 'bindHost', type: 'string' },
  '--sim-ephemeral-event-ports': { key: 'ephemeralEventPorts', type: 'bool' },
  '--sim-default-max-total-tokens': { key: 'defaultMaxTotalTokens', type: 'int' },
  '--sim-default-max-running-requests': { key: 'defaultMaxRunningRequests', type: 'int' },
  '--sim-context-length': { key: 'contextLength', type: 'int' },
  '--sim-report-dp-size': { key: 'reportDpSize', type: 'int' },
  '--sim-flood-blocks': { key: 'floodBlocks', type: 'int' },
};

/** HiCache L3 load rate (tokens/s) of an 8B model's KV, from the measured L3/recompute ratio (docs/l3-timing.md). */
export const L3_LOAD_TPS_DEFAULT = 72_000;

export const SIM_DEFAULTS: SimOptions = {
  prefillTps: 8000,
  decodeBaseMs: 6,
  decodePerReqMs: 0.35,
  hostLoadTps: 200_000,
  l3LoadTps: L3_LOAD_TPS_DEFAULT,
  timeScale: 1,
  failFirst: 0,
  unhealthyForMs: 0,
  latencySpikeMs: 0,
  latencySpikeEvery: 0,
  crashAfter: 0,
  hang: false,
  version: SGLANG_VERSION,
  legacyInfoOnly: false,
  // SGLang 0.5.23's decode fails a room whose prefill never sends its KV after
  // SGLANG_DISAGGREGATION_WAITING_TIMEOUT, 300 s by default (srt/environ.py; the decode's
  // poll in disaggregation/common/conn.py): a client of the simulator waits as long.
  pdTimeoutMs: 300_000,
  workerId: null,
  bindHost: null,
  ephemeralEventPorts: false,
  defaultMaxTotalTokens: 413_000,
  defaultMaxRunningRequests: 256,
  contextLength: 131_072,
  reportDpSize: 0,
  floodBlocks: 0,
};

export function listSimFlags(): string[] {
  return Object.keys(SIM_FLAGS);
}

function convertSim(name: string, flag: SimFlag, raw: string): Result<number | string, string> {
  if (flag.type === 'string') return { ok: true, value: raw };
  const n = Number(raw);
  if (raw.trim() === '' || Number.isNaN(n) || (flag.type === 'int' && !Number.isInteger(n)) || n < 0) {
    return {
      ok: false,
      error: `argument ${name}: invalid ${flag.type === 'int' ? 'int' : 'float'} value: '${raw}'`,
    };
  }
  return { ok: true, value: n };
}

const ratesArePositive = (o: SimOptions): boolean => o.prefillTps > 0 && o.hostLoadTps > 0 && o.l3LoadTps > 0;

/**
 * The simulator orders its queue as SGLang's fcfs and lof policies with priority scheduling do
 * (the only two SGLang allows with it), and no more: it does not retract running requests for a
 * higher priority (SGLang's default, on when the running batch is full). Refused rather than
 * served otherwise.
 */
function findUnmodelledPriorityScheduling(a: SglangArgs): string | undefined {
  if (a['enable_priority_scheduling'] !== true) return undefined;
  if (a['disable_priority_preemption'] !== true)
    return 'the simulator does not model priority preemption: pass --disable-priority-preemption with --enable-priority-scheduling';
  return undefined;
}

/** Why this launch's scheduler does not start here: SGLang's own refusal, or what is not modelled. */
function findRefusedScheduling(a: SglangArgs): string | undefined {
  const priority = findUnmodelledPriorityScheduling(a);
  if (priority !== undefined) return priority;
  const policy = resolveSchedulePolicy(a, isRadixCacheOn(a));
  return policy.ok ? undefined : policy.error;
}

/** `--decode-log-interval` (SGLang's default 40): the decode batches between two stats reports. */
export function readDecodeLogInterval(a: SglangArgs): number {
  const v = a['decode_log_interval'];
  return typeof v === 'number' && Number.isInteger(v) ? v : 40;
}

/** The engine's priority scheduling from the launch flags; null when off. */
function buildPriorityScheduling(a: SglangArgs): PriorityScheduling | null {
  if (a['enable_priority_scheduling'] !== true) return null;
  const fallback = a['default_priority_value'];
  return {
    lowValuesFirst: a['schedule_low_priority_values_first'] === true,
    defaultPriority: typeof fallback === 'number' ? fallback : null,
    decodeLogInterval: readDecodeLogInterval(a),
  };
}

/** Parse a simulator command line: SGLang's launch flags plus `--sim-*` flags. */
export function parseSimArgs(argv: readonly string[]): Result<SimConfig, string> {
  const sim: Record<string, unknown> = { ...SIM_DEFAULTS };
  const rest: string[] = [];
  const unknownSim: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const token = argv[i] ?? '';
    if (!token.startsWith('--sim-')) {
      rest.push(token);
      continue;
    }
    const eq = token.indexOf('=');
    const name = eq > 0 ? token.slice(0, eq) : token;
    const flag = SIM_FLAGS[name];
    if (!flag) {
      // Like argparse, a leftover's value is reported with it.
      unknownSim.push(token);
      const next = argv[i + 1];
      if (eq < 0 && next !== undefined && !next.startsWith('-')) unknownSim.push(argv[++i] ?? '');
      continue;
    }
    if (flag.type === 'bool') {
      sim[flag.key] = true;
      continue;
    }
    const raw = eq > 0 ? token.slice(eq + 1) : argv[++i];
    if (raw === undefined) return { ok: false, error: `argument ${name}: expected one argument` };
    const v = convertSim(name, flag, raw);
    if (!v.ok) return v;
    sim[flag.key] = v.value;
  }
  const parsed = parseSglangArgs(rest);
  if (!parsed.ok) return { ok: false, error: parsed.error.message };
  if (unknownSim.length > 0) return { ok: false, error: `unrecognized arguments: ${unknownSim.join(' ')}` };
  const issues = checkSglangArgs(parsed.value.args);
  if (issues[0]) return { ok: false, error: issues[0].message };
  const unmodelled = findRefusedScheduling(parsed.value.args);
  if (unmodelled !== undefined) return { ok: false, error: unmodelled };
  const options = sim as unknown as SimOptions;
  if (!(options.timeScale > 0)) return { ok: false, error: 'argument --sim-time-scale: must be > 0' };
  if (!ratesArePositive(options)) {
    return {
      ok: false,
      error: 'arguments --sim-prefill-tps/--sim-host-load-tps/--sim-l3-load-tps: must be > 0',
    };
  }
  return { ok: true, value: { sglang: parsed.value.args, explicit: parsed.value.explicit, sim: options } };
}

// What SGLang resolves a None to on a CUDA platform (hicache_hook.handle_hicache_ratio_default,
// overrides._page_size_default).
const DEFAULT_HICACHE_RATIO = 2.0;
const DEFAULT_PAGE_SIZE = 1;

/** Values SGLang derives when a flag is left at None. */
export interface ResolvedServing {
  readonly servedModelName: string;
  readonly tokenizerPath: string;
  readonly maxTotalTokens: number;
  readonly maxRunningRequests: number;
  readonly maxReqInputLen: number;
  readonly contextLength: number;
  readonly hostCapacity: number;
  readonly chunkedPrefillSize: number;
  readonly pageSize: number;
}

export function resolveServing(cfg: SimConfig): ResolvedServing {
  const a = cfg.sglang;
  const modelPath = a.model_path ?? '';
  const maxTotalTokens = a.max_total_tokens ?? cfg.sim.defaultMaxTotalTokens;
  const contextLength = a.context_length ?? cfg.sim.contextLength;
  // HiCache host pool: ratio x device in cache mode; --hicache-size (GB) overrides at 128 KiB a token.
  let hostCapacity = 0;
  if (a.enable_hierarchical_cache && a.hicache_host_memory_mode === 'cache') {
    hostCapacity =
      a.hicache_size > 0
        ? Math.floor((a.hicache_size * 1e9) / 131_072)
        : Math.floor((a.hicache_ratio ?? DEFAULT_HICACHE_RATIO) * maxTotalTokens);
  }
  return {
    servedModelName: a.served_model_name ?? modelPath,
    tokenizerPath: a.tokenizer_path ?? modelPath,
    maxTotalTokens,
    maxRunningRequests: a.max_running_requests ?? cfg.sim.defaultMaxRunningRequests,
    maxReqInputLen: Math.min(contextLength - 1, maxTotalTokens - 1),
    contextLength,
    hostCapacity,
    chunkedPrefillSize: a.chunked_prefill_size ?? 8192,
    pageSize: a.page_size ?? DEFAULT_PAGE_SIZE,
  };
}

/**
 * The engine's settings for a launch: one place for the server and the virtual-time replays.
 * `env` is the server's environment, where SGLang's file backend finds its directory
 * (l3-store.ts resolveL3Directory); without one, no L3 tier unless the extra config names it.
 */
export function buildEngineConfig(
  cfg: SimConfig,
  env?: Readonly<Record<string, string | undefined>>,
): EngineConfig {
  const a = cfg.sglang;
  const serving = resolveServing(cfg);
  const l3Dir = a.enable_hierarchical_cache
    ? resolveL3Directory(a.hicache_storage_backend, a.hicache_storage_backend_extra_config, env)
    : null;
  return {
    maxRunningRequests: serving.maxRunningRequests,
    maxTotalTokens: serving.maxTotalTokens,
    maxPrefillTokens: a.max_prefill_tokens,
    pageSize: serving.pageSize,
    radixCache: isRadixCacheOn(a),
    hostCapacity: serving.hostCapacity,
    writePolicy: a.hicache_write_policy,
    prefillTps: cfg.sim.prefillTps,
    hostLoadTps: cfg.sim.hostLoadTps,
    decodeBaseMs: cfg.sim.decodeBaseMs,
    decodePerReqMs: cfg.sim.decodePerReqMs,
    prefillMaxRequests: typeof a['prefill_max_requests'] === 'number' ? a['prefill_max_requests'] : null,
    priorityScheduling: buildPriorityScheduling(a),
    schedulePolicy: readSchedulePolicy(a),
    randomSeed: a.random_seed ?? 0,
    l3: l3Dir
      ? {
          store: openL3Store(l3Dir),
          servedModel: serving.servedModelName,
          loadTps: cfg.sim.l3LoadTps,
          backendName: 'HiCacheFile',
        }
      : null,
  };
}

/** The policy the scheduler runs; parseSimArgs has refused a launch without one. */
function readSchedulePolicy(a: SglangArgs): SchedulePolicyName {
  const policy = resolveSchedulePolicy(a, isRadixCacheOn(a));
  if (!policy.ok) throw new Error(policy.error);
  return policy.value;
}

/** Is the radix cache in use? (PD decode instances only with --disaggregation-decode-enable-radix-cache.) */
export function isRadixCacheOn(a: SglangArgs): boolean {
  if (a.disable_radix_cache) return false;
  if (a.disaggregation_mode === 'decode') return a.disaggregation_decode_enable_radix_cache;
  return true;
}
