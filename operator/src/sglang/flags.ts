// The SGLang launch-flag catalogue (`python -m sglang.launch_server`).
//
// One table shared by the simulator (parsing a pod's command line) and the
// operator (rendering one). Source: docs/reference sglang.md §1, itself taken
// from python/sglang/srt/server_args.py. Each entry's `dest` is the ServerArgs
// field name, which is also the key `/server_info` reports, so a parsed value
// can be compared with what a running server says about itself.
//
// The parser follows argparse's observable behaviour: `--flag value` and
// `--flag=value`, store_true booleans, the last occurrence wins, errors worded
// as argparse words them ("unrecognized arguments: ...", "argument --x:
// invalid choice: ..."). Unlike argparse it does not accept abbreviated
// prefixes of long flags: a rendered command line never needs them and they
// would make an unknown-flag check ambiguous.
//
// Pure: no I/O. `@file` values of JSON flags are kept verbatim (the file is
// read by SGLang, not by us).

export const FlagType = {
  bool: 'bool',
  int: 'int',
  float: 'float',
  string: 'string',
  enum: 'enum',
  json: 'json',
} as const;
export type FlagType = (typeof FlagType)[keyof typeof FlagType];

export interface FlagSpec {
  readonly name: `--${string}`;
  readonly dest: string;
  readonly type: FlagType;
  readonly default: boolean | number | string | null;
  readonly aliases?: readonly `--${string}`[];
  readonly choices?: readonly string[];
  /** Choices that older 0.5.x releases reject; the reference does not pin the exact release. */
  readonly newerChoices?: readonly string[];
  /** First SGLang release that has the flag, when known (`0.5.0` style). */
  readonly since?: string;
  readonly group: FlagGroup;
  /** Not on the reference sheet but a real SGLang flag the operator may emit. */
  readonly extra?: true;
}

export const FlagGroup = {
  model: 'model',
  cache: 'cache',
  scheduling: 'scheduling',
  hicache: 'hicache',
  hisparse: 'hisparse',
  disaggregation: 'disaggregation',
  runtime: 'runtime',
} as const;
export type FlagGroup = (typeof FlagGroup)[keyof typeof FlagGroup];

function defineFlag<const F extends FlagSpec>(spec: F): F {
  return spec;
}

/** Choices the API offers too: one list, so the CRD never offers what SGLang refuses. */
export const HICACHE_STORAGE_BACKENDS = [
  'file',
  'sim',
  'mooncake',
  'hf3fs',
  'nixl',
  'aibrix',
  'dynamic',
  'eic',
  'simm',
  'mori',
  'shm',
  'kvcc',
] as const;
export const TRANSFER_BACKENDS = ['mooncake', 'nixl', 'ascend', 'fake', 'mori', 'mooncake_tcp'] as const;

export const SGLANG_FLAGS = [
  // Model and serving
  defineFlag({
    name: '--model-path',
    dest: 'model_path',
    type: 'string',
    default: null,
    aliases: ['--model'],
    group: 'model',
  }),
  defineFlag({
    name: '--tokenizer-path',
    dest: 'tokenizer_path',
    type: 'string',
    default: null,
    group: 'model',
  }),
  defineFlag({ name: '--revision', dest: 'revision', type: 'string', default: null, group: 'model' }),
  defineFlag({
    name: '--served-model-name',
    dest: 'served_model_name',
    type: 'string',
    default: null,
    group: 'model',
  }),
  defineFlag({
    name: '--tp-size',
    dest: 'tp_size',
    type: 'int',
    default: 1,
    aliases: ['--tensor-parallel-size'],
    group: 'model',
  }),
  defineFlag({
    name: '--dp-size',
    dest: 'dp_size',
    type: 'int',
    default: 1,
    aliases: ['--data-parallel-size'],
    group: 'model',
  }),
  defineFlag({ name: '--host', dest: 'host', type: 'string', default: '127.0.0.1', group: 'model' }),
  defineFlag({ name: '--port', dest: 'port', type: 'int', default: 30000, group: 'model' }),
  defineFlag({ name: '--load-format', dest: 'load_format', type: 'string', default: 'auto', group: 'model' }),
  defineFlag({
    name: '--trust-remote-code',
    dest: 'trust_remote_code',
    type: 'bool',
    default: false,
    group: 'model',
    extra: true,
  }),
  defineFlag({
    name: '--context-length',
    dest: 'context_length',
    type: 'int',
    default: null,
    group: 'model',
    extra: true,
  }),
  defineFlag({
    name: '--dtype',
    dest: 'dtype',
    type: 'string',
    default: 'auto',
    group: 'model',
    extra: true,
  }),
  defineFlag({
    name: '--kv-cache-dtype',
    dest: 'kv_cache_dtype',
    type: 'string',
    default: 'auto',
    group: 'model',
    extra: true,
  }),
  defineFlag({
    name: '--quantization',
    dest: 'quantization',
    type: 'string',
    default: null,
    group: 'model',
    extra: true,
  }),
  defineFlag({
    name: '--chat-template',
    dest: 'chat_template',
    type: 'string',
    default: null,
    group: 'model',
    extra: true,
  }),
  defineFlag({
    name: '--random-seed',
    dest: 'random_seed',
    type: 'int',
    default: null,
    group: 'model',
    extra: true,
  }),
  // Memory and cache
  defineFlag({
    name: '--mem-fraction-static',
    dest: 'mem_fraction_static',
    type: 'float',
    default: null,
    group: 'cache',
  }),
  defineFlag({ name: '--page-size', dest: 'page_size', type: 'int', default: 1, group: 'cache' }),
  defineFlag({
    name: '--disable-radix-cache',
    dest: 'disable_radix_cache',
    type: 'bool',
    default: false,
    group: 'cache',
  }),
  defineFlag({
    name: '--radix-eviction-policy',
    dest: 'radix_eviction_policy',
    type: 'enum',
    default: 'lru',
    choices: ['lru', 'lfu', 'slru', 'priority'],
    group: 'cache',
  }),
  defineFlag({
    name: '--max-total-tokens',
    dest: 'max_total_tokens',
    type: 'int',
    default: null,
    group: 'cache',
  }),
  // Scheduling
  defineFlag({
    name: '--max-running-requests',
    dest: 'max_running_requests',
    type: 'int',
    default: null,
    group: 'scheduling',
  }),
  defineFlag({
    name: '--chunked-prefill-size',
    dest: 'chunked_prefill_size',
    type: 'int',
    default: null,
    group: 'scheduling',
  }),
  defineFlag({
    name: '--max-prefill-tokens',
    dest: 'max_prefill_tokens',
    type: 'int',
    default: 16384,
    group: 'scheduling',
  }),
  defineFlag({
    name: '--schedule-policy',
    dest: 'schedule_policy',
    type: 'enum',
    default: 'fcfs',
    choices: ['fcfs', 'lpm', 'random', 'dfs-weight', 'lof', 'priority', 'routing-key'],
    group: 'scheduling',
  }),
  // Runtime, observability, API
  defineFlag({
    name: '--enable-metrics',
    dest: 'enable_metrics',
    type: 'bool',
    default: false,
    group: 'runtime',
  }),
  defineFlag({
    name: '--enable-cache-report',
    dest: 'enable_cache_report',
    type: 'bool',
    default: false,
    group: 'runtime',
  }),
  defineFlag({
    name: '--incremental-streaming-output',
    dest: 'incremental_streaming_output',
    type: 'bool',
    default: false,
    group: 'runtime',
  }),
  defineFlag({
    name: '--admin-api-key',
    dest: 'admin_api_key',
    type: 'string',
    default: null,
    group: 'runtime',
  }),
  defineFlag({
    name: '--api-key',
    dest: 'api_key',
    type: 'string',
    default: null,
    group: 'runtime',
    extra: true,
  }),
  defineFlag({
    name: '--log-level',
    dest: 'log_level',
    type: 'string',
    default: 'info',
    group: 'runtime',
    extra: true,
  }),
  defineFlag({
    name: '--skip-server-warmup',
    dest: 'skip_server_warmup',
    type: 'bool',
    default: false,
    group: 'runtime',
    extra: true,
  }),
  // HiCache
  defineFlag({
    name: '--enable-hierarchical-cache',
    dest: 'enable_hierarchical_cache',
    type: 'bool',
    default: false,
    group: 'hicache',
  }),
  defineFlag({
    name: '--hicache-host-memory-mode',
    dest: 'hicache_host_memory_mode',
    type: 'enum',
    default: 'cache',
    choices: ['cache', 'buffer_only'],
    group: 'hicache',
  }),
  defineFlag({
    name: '--hicache-ratio',
    dest: 'hicache_ratio',
    type: 'float',
    default: 2.0,
    group: 'hicache',
  }),
  defineFlag({ name: '--hicache-size', dest: 'hicache_size', type: 'int', default: 0, group: 'hicache' }),
  defineFlag({
    name: '--hicache-write-policy',
    dest: 'hicache_write_policy',
    type: 'enum',
    default: 'write_through',
    choices: ['write_back', 'write_through', 'write_through_selective'],
    group: 'hicache',
  }),
  defineFlag({
    name: '--hicache-io-backend',
    dest: 'hicache_io_backend',
    type: 'enum',
    default: 'kernel',
    choices: ['direct', 'kernel', 'kernel_ascend'],
    group: 'hicache',
  }),
  defineFlag({
    name: '--hicache-mem-layout',
    dest: 'hicache_mem_layout',
    type: 'enum',
    default: 'page_first',
    choices: ['layer_first', 'page_first', 'page_first_direct', 'page_first_kv_split', 'page_head'],
    group: 'hicache',
  }),
  defineFlag({
    name: '--hicache-storage-backend',
    dest: 'hicache_storage_backend',
    type: 'enum',
    default: null,
    choices: HICACHE_STORAGE_BACKENDS,
    // An earlier 0.5.x list reads file|mooncake|hf3fs|nixl|aibrix|dynamic|eic|simm.
    newerChoices: ['sim', 'mori', 'shm', 'kvcc'],
    group: 'hicache',
  }),
  defineFlag({
    name: '--hicache-storage-prefetch-policy',
    dest: 'hicache_storage_prefetch_policy',
    type: 'enum',
    default: 'timeout',
    choices: ['best_effort', 'wait_complete', 'timeout'],
    group: 'hicache',
  }),
  defineFlag({
    name: '--hicache-storage-backend-extra-config',
    dest: 'hicache_storage_backend_extra_config',
    type: 'json',
    default: null,
    group: 'hicache',
  }),
  // HiSparse (the complete set)
  defineFlag({
    name: '--enable-hisparse',
    dest: 'enable_hisparse',
    type: 'bool',
    default: false,
    group: 'hisparse',
  }),
  defineFlag({
    name: '--hisparse-config',
    dest: 'hisparse_config',
    type: 'json',
    default: null,
    aliases: ['--hierarchical-sparse-attention-extra-config'],
    group: 'hisparse',
  }),
  defineFlag({
    name: '--dsa-prefill-backend',
    dest: 'dsa_prefill_backend',
    type: 'string',
    default: null,
    group: 'hisparse',
  }),
  defineFlag({
    name: '--dsa-decode-backend',
    dest: 'dsa_decode_backend',
    type: 'string',
    default: null,
    group: 'hisparse',
  }),
  defineFlag({
    name: '--enable-dsa-cache-layer-split',
    dest: 'enable_dsa_cache_layer_split',
    type: 'bool',
    default: false,
    group: 'hisparse',
  }),
  // Prefill/decode disaggregation
  defineFlag({
    name: '--disaggregation-mode',
    dest: 'disaggregation_mode',
    type: 'enum',
    default: 'null',
    choices: ['null', 'prefill', 'decode'],
    group: 'disaggregation',
  }),
  defineFlag({
    name: '--disaggregation-transfer-backend',
    dest: 'disaggregation_transfer_backend',
    type: 'enum',
    default: 'mooncake',
    choices: TRANSFER_BACKENDS,
    group: 'disaggregation',
  }),
  defineFlag({
    name: '--disaggregation-bootstrap-port',
    dest: 'disaggregation_bootstrap_port',
    type: 'int',
    default: 8998,
    group: 'disaggregation',
  }),
  defineFlag({
    name: '--disaggregation-ib-device',
    dest: 'disaggregation_ib_device',
    type: 'string',
    default: null,
    group: 'disaggregation',
  }),
  defineFlag({
    name: '--disaggregation-decode-enable-radix-cache',
    dest: 'disaggregation_decode_enable_radix_cache',
    type: 'bool',
    default: false,
    group: 'disaggregation',
  }),
  defineFlag({
    name: '--disaggregation-decode-enable-offload-kvcache',
    dest: 'disaggregation_decode_enable_offload_kvcache',
    type: 'bool',
    default: false,
    group: 'disaggregation',
  }),
  defineFlag({
    name: '--num-reserved-decode-tokens',
    dest: 'num_reserved_decode_tokens',
    type: 'int',
    default: 512,
    group: 'disaggregation',
  }),
] as const;

type Flags = (typeof SGLANG_FLAGS)[number];
export type SglangDest = Flags['dest'];

type ValueOf<F> = F extends { type: 'bool' }
  ? boolean
  : F extends { type: 'int' | 'float' }
    ? number
    : F extends { type: 'enum'; choices: readonly (infer C)[] }
      ? C
      : string;
type DefaultOf<F> = F extends { default: null } ? null : never;

/** Parsed launch arguments keyed by ServerArgs field name; `null` where SGLang's default is None. */
export type SglangArgs = { [F in Flags as F['dest']]: ValueOf<F> | DefaultOf<F> };
/** Input of the renderer: any subset; absent, `null` and default values are not rendered. */
export type SglangArgsInput = { [K in keyof SglangArgs]?: SglangArgs[K] | null | undefined };

export type SglangArgIssue =
  | { readonly code: 'unrecognized_arguments'; readonly path: readonly string[]; readonly message: string }
  | { readonly code: 'invalid_choice'; readonly path: readonly string[]; readonly message: string }
  | { readonly code: 'invalid_value'; readonly path: readonly string[]; readonly message: string }
  | { readonly code: 'expected_one_argument'; readonly path: readonly string[]; readonly message: string }
  | { readonly code: 'ignored_explicit_argument'; readonly path: readonly string[]; readonly message: string }
  | { readonly code: 'required'; readonly path: readonly string[]; readonly message: string }
  | { readonly code: 'incompatible'; readonly path: readonly string[]; readonly message: string };

export type Result<T, E> =
  { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: E };

export interface SglangArgError {
  /** argparse-style one-line message, e.g. "unrecognized arguments: --foo". */
  readonly message: string;
  readonly issues: readonly SglangArgIssue[];
}

export interface ParsedSglangArgs {
  readonly args: SglangArgs;
  /** Dests given on the command line (so a caller can tell an explicit default from an omitted flag). */
  readonly explicit: ReadonlySet<SglangDest>;
}

const BY_NAME: ReadonlyMap<string, FlagSpec> = new Map(
  SGLANG_FLAGS.flatMap((f): [string, FlagSpec][] => [
    [f.name, f],
    ...('aliases' in f ? f.aliases : []).map((a): [string, FlagSpec] => [a, f]),
  ]),
);

export function findSglangFlag(nameOrAlias: string): FlagSpec | undefined {
  return BY_NAME.get(nameOrAlias);
}

export function buildDefaultSglangArgs(): SglangArgs {
  const out: Record<string, unknown> = {};
  for (const f of SGLANG_FLAGS) out[f.dest] = f.default;
  return out as SglangArgs;
}

function formatChoice(c: string): string {
  return `'${c}'`;
}

function convertValue(flag: FlagSpec, raw: string): Result<boolean | number | string, SglangArgIssue> {
  const path = [flag.dest];
  switch (flag.type) {
    case 'int': {
      if (!/^[-+]?\d+$/.test(raw.trim())) {
        return {
          ok: false,
          error: {
            code: 'invalid_value',
            path,
            message: `argument ${flag.name}: invalid int value: '${raw}'`,
          },
        };
      }
      return { ok: true, value: Number.parseInt(raw, 10) };
    }
    case 'float': {
      const n = Number(raw);
      if (raw.trim() === '' || Number.isNaN(n)) {
        return {
          ok: false,
          error: {
            code: 'invalid_value',
            path,
            message: `argument ${flag.name}: invalid float value: '${raw}'`,
          },
        };
      }
      return { ok: true, value: n };
    }
    case 'enum': {
      const choices = flag.choices ?? [];
      if (!choices.includes(raw)) {
        const list = choices.map(formatChoice).join(', ');
        return {
          ok: false,
          error: {
            code: 'invalid_choice',
            path,
            message: `argument ${flag.name}: invalid choice: '${raw}' (choose from ${list})`,
          },
        };
      }
      return { ok: true, value: raw };
    }
    case 'json': {
      if (raw.startsWith('@')) return { ok: true, value: raw };
      try {
        JSON.parse(raw);
      } catch {
        return {
          ok: false,
          error: {
            code: 'invalid_value',
            path,
            message: `argument ${flag.name}: invalid JSON value: '${raw}'`,
          },
        };
      }
      return { ok: true, value: raw };
    }
    case 'string':
      return { ok: true, value: raw };
    case 'bool':
      return { ok: true, value: true };
  }
}

/** A token argparse would treat as an option rather than a value (negative numbers are values). */
function looksLikeOption(token: string): boolean {
  return token.startsWith('-') && !/^-\d/.test(token);
}

/**
 * Parse a launch command line (the arguments after `sglang.launch_server`).
 * `--model-path` is required, as in SGLang.
 */
export function parseSglangArgs(argv: readonly string[]): Result<ParsedSglangArgs, SglangArgError> {
  const values: Record<string, unknown> = buildDefaultSglangArgs();
  const explicit = new Set<SglangDest>();
  const unknown: string[] = [];
  const issues: SglangArgIssue[] = [];

  for (let i = 0; i < argv.length; i++) {
    const token = argv[i] ?? '';
    const eq = token.startsWith('--') ? token.indexOf('=') : -1;
    const name = eq > 0 ? token.slice(0, eq) : token;
    const flag = BY_NAME.get(name);
    if (!flag) {
      unknown.push(token);
      continue;
    }
    let raw: string | undefined;
    if (flag.type === 'bool') {
      if (eq > 0) {
        issues.push({
          code: 'ignored_explicit_argument',
          path: [flag.dest],
          message: `argument ${name}: ignored explicit argument '${token.slice(eq + 1)}'`,
        });
        continue;
      }
    } else if (eq > 0) {
      raw = token.slice(eq + 1);
    } else {
      const next = argv[i + 1];
      if (next === undefined || looksLikeOption(next)) {
        issues.push({
          code: 'expected_one_argument',
          path: [flag.dest],
          message: `argument ${name}: expected one argument`,
        });
        continue;
      }
      raw = next;
      i++;
    }
    const converted = convertValue(flag, raw ?? '');
    if (!converted.ok) {
      issues.push(converted.error);
      continue;
    }
    values[flag.dest] = converted.value;
    explicit.add(flag.dest as SglangDest);
  }

  // argparse reports a bad value before it gets to leftovers, and leftovers before required ones.
  if (issues.length === 0 && unknown.length > 0) {
    issues.push({
      code: 'unrecognized_arguments',
      path: unknown,
      message: `unrecognized arguments: ${unknown.join(' ')}`,
    });
  }
  if (issues.length === 0 && values['model_path'] === null) {
    issues.push({
      code: 'required',
      path: ['model_path'],
      message: 'the following arguments are required: --model-path/--model',
    });
  }
  const first = issues[0];
  if (first) return { ok: false, error: { message: first.message, issues } };
  return { ok: true, value: { args: values as SglangArgs, explicit } };
}

/**
 * Combinations SGLang refuses at startup (ServerArgs.__post_init__ checks) that
 * the reference sheet states. Returns every issue, empty when the set is valid.
 */
export function checkSglangArgs(args: SglangArgs): SglangArgIssue[] {
  const issues: SglangArgIssue[] = [];
  if (args.enable_hisparse && args.disaggregation_mode !== 'decode') {
    issues.push({
      code: 'incompatible',
      path: ['enable_hisparse', 'disaggregation_mode'],
      message: '--enable-hisparse runs only on a PD decode instance (--disaggregation-mode decode)',
    });
  }
  if (args.enable_hisparse && args.disaggregation_decode_enable_radix_cache) {
    issues.push({
      code: 'incompatible',
      path: ['enable_hisparse', 'disaggregation_decode_enable_radix_cache'],
      message: '--disaggregation-decode-enable-radix-cache is incompatible with --enable-hisparse',
    });
  }
  if (args.page_size < 1) {
    issues.push({
      code: 'invalid_value',
      path: ['page_size'],
      message: 'argument --page-size: must be >= 1',
    });
  }
  return issues;
}

function renderValue(flag: FlagSpec, value: boolean | number | string): string {
  if (typeof value === 'number' && flag.type === 'float' && Number.isInteger(value)) return value.toFixed(1);
  return String(value);
}

/**
 * Render arguments as a command line in catalogue order. Absent, `null` and
 * default-valued entries are left out (SGLang then applies the same default),
 * `false` booleans are left out, `true` ones become a bare flag.
 */
export function renderSglangArgs(args: SglangArgsInput): string[] {
  const out: string[] = [];
  const input = args as Record<string, boolean | number | string | null | undefined>;
  for (const flag of SGLANG_FLAGS as readonly FlagSpec[]) {
    const value = input[flag.dest];
    if (value === undefined || value === null || value === flag.default) continue;
    if (flag.type === 'bool') {
      if (value === true) out.push(flag.name);
      continue;
    }
    out.push(flag.name, renderValue(flag, value));
  }
  return out;
}
