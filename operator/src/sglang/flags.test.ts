import { describe, expect, it } from 'vitest';
import {
  SGLANG_FLAGS,
  buildDefaultSglangArgs,
  checkSglangArgs,
  findSglangFlag,
  parseSglangArgs,
  renderSglangArgs,
  type SglangArgsInput,
} from './flags.ts';

function parseOk(argv: string[]) {
  const r = parseSglangArgs(argv);
  if (!r.ok) throw new Error(r.error.message);
  return r.value;
}

describe('SGLang flag catalogue', () => {
  it('has unique names, aliases and dests', () => {
    const names = SGLANG_FLAGS.flatMap((f) => [f.name, ...('aliases' in f ? f.aliases : [])]);
    expect(new Set(names).size).toBe(names.length);
    const dests = SGLANG_FLAGS.map((f) => f.dest);
    expect(new Set(dests).size).toBe(dests.length);
  });

  it('derives every dest from its flag name, as argparse does', () => {
    for (const f of SGLANG_FLAGS) expect(f.dest).toBe(f.name.slice(2).replaceAll('-', '_'));
  });

  it('gives every enum a default among its choices (or None)', () => {
    for (const f of SGLANG_FLAGS) {
      if (f.type !== 'enum') continue;
      if (f.default !== null) expect(f.choices as readonly string[]).toContain(f.default);
    }
  });

  it.each([
    ['--model-path', 'string', null],
    ['--tp-size', 'int', 1],
    ['--dp-size', 'int', 1],
    ['--host', 'string', '127.0.0.1'],
    ['--port', 'int', 30000],
    ['--page-size', 'int', 1],
    ['--max-prefill-tokens', 'int', 16384],
    ['--radix-eviction-policy', 'enum', 'lru'],
    ['--schedule-policy', 'enum', 'fcfs'],
    ['--hicache-ratio', 'float', 2.0],
    ['--hicache-write-policy', 'enum', 'write_through'],
    ['--hicache-io-backend', 'enum', 'kernel'],
    ['--hicache-mem-layout', 'enum', 'page_first'],
    ['--hicache-storage-backend', 'enum', null],
    ['--hicache-storage-prefetch-policy', 'enum', 'timeout'],
    ['--hicache-host-memory-mode', 'enum', 'cache'],
    ['--disaggregation-mode', 'enum', 'null'],
    ['--disaggregation-transfer-backend', 'enum', 'mooncake'],
    ['--disaggregation-bootstrap-port', 'int', 8998],
    ['--num-reserved-decode-tokens', 'int', 512],
    ['--hisparse-config', 'json', null],
  ])('%s is a %s defaulting to %j (reference §1)', (name, type, def) => {
    const f = findSglangFlag(name);
    expect(f?.type).toBe(type);
    expect(f?.default).toBe(def);
  });

  it.each([
    ['--model', 'model_path'],
    ['--tensor-parallel-size', 'tp_size'],
    ['--data-parallel-size', 'dp_size'],
    ['--hierarchical-sparse-attention-extra-config', 'hisparse_config'],
  ])('alias %s maps to %s', (alias, dest) => {
    expect(findSglangFlag(alias)?.dest).toBe(dest);
  });

  it('marks the storage backends older 0.5.x releases lack', () => {
    expect(findSglangFlag('--hicache-storage-backend')?.newerChoices).toEqual(['sim', 'mori', 'shm', 'kvcc']);
  });
});

describe('parseSglangArgs', () => {
  it('parses values, aliases, = form and booleans; fills defaults', () => {
    const { args, explicit } = parseOk([
      '--model',
      'meta-llama/Llama-3.1-8B-Instruct',
      '--tensor-parallel-size',
      '2',
      '--port=31000',
      '--page-size',
      '16',
      '--enable-cache-report',
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
    expect(args.enable_metrics).toBe(false);
    expect(args.hicache_ratio).toBe(1.5);
    expect(args.hisparse_config).toBe('{"top_k":2048}');
    expect(args.host).toBe('127.0.0.1');
    expect(explicit.has('port')).toBe(true);
    expect(explicit.has('host')).toBe(false);
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
      "argument --schedule-policy: invalid choice: 'sjf' (choose from 'fcfs', 'lpm', 'random', 'dfs-weight', 'lof', 'priority', 'routing-key')",
    ],
    [['--model-path', 'm', '--port', 'x'], "argument --port: invalid int value: 'x'"],
    [
      ['--model-path', 'm', '--hicache-ratio', 'lots'],
      "argument --hicache-ratio: invalid float value: 'lots'",
    ],
    [['--model-path', 'm', '--port'], 'argument --port: expected one argument'],
    [['--model-path', '--port', '1'], 'argument --model-path: expected one argument'],
    [
      ['--model-path', 'm', '--hisparse-config', '{bad'],
      "argument --hisparse-config: invalid JSON value: '{bad'",
    ],
    [
      ['--model-path', 'm', '--enable-metrics=yes'],
      "argument --enable-metrics: ignored explicit argument 'yes'",
    ],
    [['--port', '1'], 'the following arguments are required: --model-path/--model'],
  ])('rejects %j with argparse wording', (argv, message) => {
    const r = parseSglangArgs(argv);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.error.message).toBe(message);
  });

  it('keeps @file JSON values verbatim (SGLang reads the file)', () => {
    expect(
      parseOk(['--model-path', 'm', '--hicache-storage-backend-extra-config', '@/etc/x.json']).args,
    ).toMatchObject({ hicache_storage_backend_extra_config: '@/etc/x.json' });
  });
});

describe('checkSglangArgs', () => {
  it('refuses HiSparse outside a decode instance and with decode radix cache', () => {
    const base = { ...buildDefaultSglangArgs(), model_path: 'm', enable_hisparse: true };
    expect(checkSglangArgs(base).map((i) => i.code)).toEqual(['incompatible']);
    expect(
      checkSglangArgs({
        ...base,
        disaggregation_mode: 'decode',
        disaggregation_decode_enable_radix_cache: true,
      }),
    ).toHaveLength(1);
    expect(checkSglangArgs({ ...base, disaggregation_mode: 'decode' })).toEqual([]);
  });
});

describe('renderSglangArgs', () => {
  it('renders only non-default values, booleans as bare flags, in catalogue order', () => {
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
    expect(parseOk(renderSglangArgs(parsed)).args).toEqual(parsed);
    expect(new Set(renderSglangArgs(parsed))).toEqual(new Set(argv));
  });
});
