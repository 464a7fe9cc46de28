import { describe, expect, it } from 'vitest';
import { choicesOf, findFlag, findFlagByDest, SGLANG_FLAGS, SGLANG_VERSION } from './catalogue.ts';
import {
  DISAGGREGATION_MODES,
  HICACHE_HOST_MEMORY_MODES,
  HICACHE_WRITE_POLICIES,
  parseSglangArgs,
  renderSglangArgs,
  TYPED_DESTS,
  type SglangArgsInput,
  type SglangDest,
} from './flags.ts';

function parseOk(argv: string[]) {
  const r = parseSglangArgs(argv);
  if (!r.ok) throw new Error(r.error.message);
  return r.value;
}

// What each typed kind may be in SGLang's table: its argparse converter, or no value at all.
const KIND_TYPES: Readonly<Record<string, readonly (string | null)[]>> = {
  bool: [null],
  int: ['int', 'human_readable_int'],
  float: ['float'],
  string: ['str', 'json', 'nullable_str'],
};

describe('the flag catalogue (SGLang 0.5.23 own table)', () => {
  it('is the pinned release', () => {
    expect(SGLANG_VERSION).toBe('0.5.23');
    expect(SGLANG_FLAGS.length).toBeGreaterThan(500);
  });

  it.each(Object.entries(TYPED_DESTS))('types %s as SGLang declares it (%s)', (dest, kind) => {
    const flag = findFlagByDest(dest);
    expect(flag, `${dest} is not a flag of SGLang ${SGLANG_VERSION}`).toBeDefined();
    expect(KIND_TYPES[kind]).toContain(flag?.type ?? null);
    const d = flag?.default;
    if (d !== null)
      expect(typeof d).toBe(kind === 'bool' ? 'boolean' : kind === 'string' ? 'string' : 'number');
  });

  it.each([
    ['--disaggregation-mode', DISAGGREGATION_MODES],
    ['--hicache-write-policy', HICACHE_WRITE_POLICIES],
    ['--hicache-host-memory-mode', HICACHE_HOST_MEMORY_MODES],
  ])('types the choices of %s as SGLang lists them', (name, typed) => {
    expect([...typed].sort()).toEqual([...choicesOf(name)].sort());
  });

  // The issue this guards: a catalogue that wrote SGLang's defaults by hand had
  // --hicache-ratio default 2 (SGLang: None) and --page-size 1 (SGLang: None),
  // so `ratio: 2` and `pageSize: 1` were never rendered.
  it.each([
    ['--hicache-ratio', null],
    ['--page-size', null],
    ['--tp-size', 1],
    ['--max-prefill-tokens', 16384],
    ['--disaggregation-transfer-backend', 'mooncake'],
    ['--disaggregation-bootstrap-port', 8998],
    ['--hicache-storage-backend', null],
  ])('%s defaults to %j, as SGLang', (name, def) => {
    expect(findFlag(name)?.default).toBe(def);
  });

  it('offers only the storage backends and policies 0.5.23 has', () => {
    expect(choicesOf('--hicache-storage-backend')).not.toContain('kvcc');
    expect(choicesOf('--hicache-storage-backend')).toEqual(
      expect.arrayContaining(['npu_memcache', 'tensorcast', 'seaweedfs']),
    );
    expect(choicesOf('--radix-eviction-policy')).toContain('tlru');
    expect(choicesOf('--schedule-policy')).toEqual(
      expect.arrayContaining(['hrrn', 'shortest-prefill-first']),
    );
    expect(findFlag('--enable-hicache')?.dest).toBe('enable_hierarchical_cache');
  });
});

describe('parseSglangArgs', () => {
  it('parses values, aliases, = form and booleans; fills SGLang defaults', () => {
    const { args, explicit } = parseOk([
      '--model',
      'meta-llama/Llama-3.1-8B-Instruct',
      '--tensor-parallel-size',
      '2',
      '--port=31000',
      '--page-size',
      '16',
      '--enable-cache-report',
      '--enable-hicache',
      '--hicache-ratio',
      '1.5',
      '--hisparse-config',
      '{"top_k":2048}',
    ]);
    expect(args.tp_size).toBe(2);
    expect(args.model_path).toBe('meta-llama/Llama-3.1-8B-Instruct');
    expect(args.port).toBe(31000);
    expect(args.page_size).toBe(16);
    expect(args.enable_cache_report).toBe(true);
    expect(args.enable_hierarchical_cache).toBe(true);
    expect(args.enable_metrics).toBe(false);
    expect(args.hicache_ratio).toBe(1.5);
    expect(args.hisparse_config).toBe('{"top_k":2048}');
    expect(args.host).toBe('127.0.0.1');
    expect(args['sleep_on_idle']).toBe(false);
    expect(explicit.has('port')).toBe(true);
    expect(explicit.has('host')).toBe(false);
  });

  it('accepts every flag of SGLang, not only the ones cacheroute renders', () => {
    const { args } = parseOk(['--model-path', 'm', '--sleep-on-idle', '--attention-backend', 'torch_native']);
    expect(args['sleep_on_idle']).toBe(true);
    expect(args['attention_backend']).toBe('torch_native');
  });

  it('takes sizes as SGLang writes them (128k, 2Ki)', () => {
    expect(parseOk(['--model-path', 'm', '--max-total-tokens', '128k']).args.max_total_tokens).toBe(128_000);
    expect(parseOk(['--model-path', 'm', '--context-length', '2Ki']).args.context_length).toBe(2048);
  });

  it('sets a --x/--no-x pair and collects multi-value flags', () => {
    const { args } = parseOk([
      '--model-path',
      'm',
      '--no-enable-tf32-matmul',
      '--cuda-graph-bs-decode',
      '1',
      '2',
    ]);
    expect(args['enable_tf32_matmul']).toBe(false);
    expect(args['cuda_graph_bs_decode']).toEqual([1, 2]);
  });

  it('takes a unique prefix of a long option, as argparse does', () => {
    expect(parseOk(['--model-path', 'm', '--tp', '4']).args.tp_size).toBe(4);
  });

  it('lets the last occurrence win', () => {
    expect(parseOk(['--model-path', 'm', '--port', '1', '--port', '2']).args.port).toBe(2);
  });

  it('accepts a negative number as a value', () => {
    expect(parseOk(['--model-path', 'm', '--random-seed', '-3']).args.random_seed).toBe(-3);
  });

  it.each([
    [['--model-path', 'm', '--foo'], 'unrecognized arguments: --foo'],
    [['--model-path', 'm', '--foo', 'bar', '--baz=1'], 'unrecognized arguments: --foo bar --baz=1'],
    [
      ['--model-path', 'm', '--schedule-policy', 'sjf'],
      "argument --schedule-policy: invalid choice: 'sjf' (choose from 'lpm', 'random', 'fcfs', 'dfs-weight', 'lof', 'priority', 'routing-key', 'hrrn', 'shortest-prefill-first')",
    ],
    [
      ['--model-path', 'm', '--hicache-storage-backend', 'kvcc'],
      "argument --hicache-storage-backend: invalid choice: 'kvcc' (choose from 'file', 'sim', 'mooncake', 'npu_memcache', 'hf3fs', 'nixl', 'aibrix', 'dynamic', 'eic', 'simm', 'mori', 'shm', 'tensorcast', 'seaweedfs')",
    ],
    [['--model-path', 'm', '--port', 'x'], "argument --port: invalid int value: 'x'"],
    [
      ['--model-path', 'm', '--tp-size', 'x'],
      "argument --tp-size/--tensor-parallel-size: invalid int value: 'x'",
    ],
    [
      ['--model-path', 'm', '--hicache-ratio', 'lots'],
      "argument --hicache-ratio: invalid float value: 'lots'",
    ],
    [['--model-path', 'm', '--port'], 'argument --port: expected one argument'],
    [['--model-path', '--port', '1'], 'argument --model-path/--model: expected one argument'],
    [
      ['--model-path', 'm', '--enable-metrics=yes'],
      "argument --enable-metrics: ignored explicit argument 'yes'",
    ],
    [['--port', '1'], 'the following arguments are required: --model-path/--model'],
    [['--port', '1', '--foo'], 'the following arguments are required: --model-path/--model'],
    [['--model-path', 'm', '--port', 'x', '--foo'], "argument --port: invalid int value: 'x'"],
  ])('rejects %j with argparse wording', (argv, message) => {
    const r = parseSglangArgs(argv);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.error.message).toBe(message);
  });

  it('refuses an ambiguous prefix', () => {
    const r = parseSglangArgs(['--model-path', 'm', '--hicache', 'x']);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.error.message).toMatch(/^ambiguous option: --hicache could match /);
  });

  it('keeps @file JSON values verbatim (SGLang reads the file)', () => {
    expect(
      parseOk(['--model-path', 'm', '--hicache-storage-backend-extra-config', '@/etc/x.json']).args,
    ).toMatchObject({ hicache_storage_backend_extra_config: '@/etc/x.json' });
  });
});

describe('renderSglangArgs', () => {
  it('renders only non-default values, booleans as bare flags, in TYPED_DESTS order', () => {
    const input: SglangArgsInput = {
      port: 8000,
      model_path: 'm',
      host: '127.0.0.1',
      enable_metrics: true,
      disable_radix_cache: false,
      hicache_ratio: 3,
      revision: null,
    };
    expect(renderSglangArgs(input)).toEqual([
      '--model-path',
      'm',
      '--port',
      '8000',
      '--enable-metrics',
      '--hicache-ratio',
      '3.0',
    ]);
  });

  it('renders hicache ratio 2 and page size 1, which are not SGLang defaults', () => {
    expect(renderSglangArgs({ hicache_ratio: 2, page_size: 1 })).toEqual([
      '--page-size',
      '1',
      '--hicache-ratio',
      '2.0',
    ]);
  });

  it('round-trips through the parser', () => {
    const argv = [
      '--model-path',
      'Qwen/Qwen3-8B',
      '--served-model-name',
      'qwen',
      '--tp-size',
      '2',
      '--page-size',
      '64',
      '--disable-radix-cache',
      '--enable-hierarchical-cache',
      '--hicache-storage-backend',
      'file',
      '--disaggregation-mode',
      'decode',
      '--enable-hisparse',
      '--hisparse-config',
      '{"top_k":2048,"swap_in_block_size":512}',
    ];
    const parsed = parseOk(argv).args;
    const typed = Object.fromEntries(
      Object.keys(TYPED_DESTS).map((d) => [d, parsed[d as SglangDest]]),
    ) as SglangArgsInput;
    expect(parseOk(renderSglangArgs(typed)).args).toEqual(parsed);
    expect(new Set(renderSglangArgs(typed))).toEqual(new Set(argv));
  });
});
