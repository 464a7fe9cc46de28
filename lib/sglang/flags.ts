// The SGLang launch arguments cacheroute renders (operator) and reads
// (simulator), typed. Names, aliases, choices and defaults are SGLang's own:
// they come from the pinned release's flag table (catalogue.ts), and a unit
// test holds each typed entry below to it. The parser accepts every flag of
// that table, not only these.
//
// Pure: no I/O. JSON-valued flags keep their text verbatim (`@file` included:
// SGLang reads the file, not us).
import { findFlagByDest } from './catalogue.ts';
import { parseSglangArgv, type ParsedArgValues, type Result, type SglangArgIssue } from './parse-args.ts';

export type { Result, SglangArgIssue } from './parse-args.ts';

type ValueKind = 'string' | 'int' | 'float' | 'bool';

/**
 * The dests cacheroute renders or reads, with their value kind, in the order
 * a rendered command line lists them. The order is part of every identity
 * fingerprint (the argv is hashed): append, never reorder.
 */
export const TYPED_DESTS = {
  // Model and serving
  model_path: 'string',
  tokenizer_path: 'string',
  revision: 'string',
  served_model_name: 'string',
  tp_size: 'int',
  dp_size: 'int',
  host: 'string',
  port: 'int',
  load_format: 'string',
  trust_remote_code: 'bool',
  context_length: 'int',
  dtype: 'string',
  kv_cache_dtype: 'string',
  quantization: 'string',
  chat_template: 'string',
  random_seed: 'int',
  // Memory and cache
  mem_fraction_static: 'float',
  page_size: 'int',
  disable_radix_cache: 'bool',
  radix_eviction_policy: 'string',
  max_total_tokens: 'int',
  // Scheduling
  max_running_requests: 'int',
  chunked_prefill_size: 'int',
  max_prefill_tokens: 'int',
  schedule_policy: 'string',
  // Runtime, observability, API
  enable_metrics: 'bool',
  enable_cache_report: 'bool',
  incremental_streaming_output: 'bool',
  admin_api_key: 'string',
  api_key: 'string',
  log_level: 'string',
  skip_server_warmup: 'bool',
  // HiCache
  enable_hierarchical_cache: 'bool',
  hicache_host_memory_mode: 'string',
  hicache_ratio: 'float',
  hicache_size: 'int',
  hicache_write_policy: 'string',
  hicache_io_backend: 'string',
  hicache_mem_layout: 'string',
  hicache_storage_backend: 'string',
  hicache_storage_prefetch_policy: 'string',
  hicache_storage_backend_extra_config: 'string',
  // HiSparse
  enable_hisparse: 'bool',
  hisparse_config: 'string',
  dsa_prefill_backend: 'string',
  dsa_decode_backend: 'string',
  enable_dsa_cache_layer_split: 'bool',
  // Prefill/decode disaggregation
  disaggregation_mode: 'string',
  disaggregation_transfer_backend: 'string',
  disaggregation_bootstrap_port: 'int',
  disaggregation_ib_device: 'string',
  disaggregation_decode_enable_radix_cache: 'bool',
  disaggregation_decode_enable_offload_kvcache: 'bool',
  num_reserved_decode_tokens: 'int',
  // Appended after the fingerprint-ordered set above.
  enable_mixed_chunk: 'bool',
  kv_events_config: 'string',
  load_publish_endpoint: 'string',
  // A replica across nodes (parallelism.nodes); rank and address are per pod, rendered apart.
  nnodes: 'int',
  node_rank: 'int',
  dist_init_addr: 'string',
  // spec.serving.priorityScheduling (false renders nothing: command lines without it are as before).
  enable_priority_scheduling: 'bool',
  disable_priority_preemption: 'bool',
  default_priority_value: 'int',
} as const satisfies Record<string, ValueKind>;

export type SglangDest = keyof typeof TYPED_DESTS;

type KindValue<K> = K extends 'bool' ? boolean : K extends 'int' | 'float' ? number : string;

/** Choice unions the code branches on; a unit test holds each to SGLang's own list. */
export const DISAGGREGATION_MODES = ['null', 'prefill', 'decode'] as const;
export const HICACHE_WRITE_POLICIES = ['write_back', 'write_through', 'write_through_selective'] as const;
export const HICACHE_HOST_MEMORY_MODES = ['cache', 'buffer_only'] as const;

interface Narrowed {
  disaggregation_mode: (typeof DISAGGREGATION_MODES)[number];
  hicache_write_policy: (typeof HICACHE_WRITE_POLICIES)[number];
  hicache_host_memory_mode: (typeof HICACHE_HOST_MEMORY_MODES)[number];
}

// Flags whose default is a value, never None: the parsed record always holds one.
type NonNullDest =
  | 'tp_size'
  | 'dp_size'
  | 'host'
  | 'port'
  | 'load_format'
  | 'dtype'
  | 'kv_cache_dtype'
  | 'radix_eviction_policy'
  | 'max_prefill_tokens'
  | 'schedule_policy'
  | 'log_level'
  | 'hicache_host_memory_mode'
  | 'hicache_size'
  | 'hicache_write_policy'
  | 'hicache_io_backend'
  | 'hicache_mem_layout'
  | 'hicache_storage_prefetch_policy'
  | 'disaggregation_mode'
  | 'disaggregation_transfer_backend'
  | 'disaggregation_bootstrap_port'
  | 'num_reserved_decode_tokens'
  | 'nnodes'
  | 'node_rank';

type Typed = {
  readonly [D in SglangDest]: D extends keyof Narrowed
    ? Narrowed[D]
    : (typeof TYPED_DESTS)[D] extends 'bool'
      ? boolean
      : D extends NonNullDest
        ? KindValue<(typeof TYPED_DESTS)[D]>
        : KindValue<(typeof TYPED_DESTS)[D]> | null;
};

/** Parsed launch arguments: the typed dests above, and every other flag of SGLang by its dest. */
export type SglangArgs = Typed & ParsedArgValues;
/** Input of the renderer: any subset; absent, `null` and default values are not rendered. */
export type SglangArgsInput = { [D in SglangDest]?: Typed[D] | null | undefined };

export interface ParsedSglangArgs {
  readonly args: SglangArgs;
  /** Dests given on the command line (so a caller can tell an explicit default from an omitted flag). */
  readonly explicit: ReadonlySet<string>;
}

export interface SglangArgError {
  /** argparse's one-line message, e.g. "unrecognized arguments: --foo". */
  readonly message: string;
  readonly issues: readonly SglangArgIssue[];
}

/**
 * Parse a launch command line (the arguments after `sglang.launch_server`) as
 * SGLang's own parser does; `--model-path` is required, as in SGLang.
 */
export function parseSglangArgs(argv: readonly string[]): Result<ParsedSglangArgs, SglangArgError> {
  const parsed = parseSglangArgv(argv);
  if (!parsed.ok) return { ok: false, error: { message: parsed.error.message, issues: [parsed.error] } };
  // The converters of catalogue.ts give each dest the kind its flag declares (held by flags.test.ts).
  return { ok: true, value: { args: parsed.value.values as SglangArgs, explicit: parsed.value.explicit } };
}

/** The default SGLang applies when a flag is left out (null for None). */
export function defaultOf(dest: SglangDest): unknown {
  return findFlagByDest(dest)?.default ?? null;
}

function renderValue(kind: ValueKind, value: boolean | number | string): string {
  // Python prints a float with a fraction (2.0); SGLang would parse "2" too, but identity hashes the text.
  if (kind === 'float' && typeof value === 'number' && Number.isInteger(value)) return value.toFixed(1);
  return String(value);
}

/**
 * Render arguments as a command line in TYPED_DESTS order. Absent, `null` and
 * SGLang-default values are left out (SGLang then applies the same default),
 * `false` booleans are left out, `true` ones become the bare flag.
 */
export function renderSglangArgs(args: SglangArgsInput): string[] {
  const out: string[] = [];
  for (const [dest, kind] of Object.entries(TYPED_DESTS) as [SglangDest, ValueKind][]) {
    const value = args[dest];
    if (value === undefined || value === null || value === defaultOf(dest)) continue;
    const name = findFlagByDest(dest)?.name;
    if (name === undefined) throw new Error(`${dest} is not a flag of the pinned SGLang`);
    if (kind === 'bool') {
      if (value === true) out.push(name);
      continue;
    }
    out.push(name, renderValue(kind, value));
  }
  return out;
}
