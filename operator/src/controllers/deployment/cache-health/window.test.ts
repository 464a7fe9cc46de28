import { describe, expect, it } from 'vitest';
import { parseRuntimeCacheSample } from './runtime-sample.ts';
import { CounterWindow } from './window.ts';

// As SGLang 0.5.23's prometheus_client writes them (two ranks, streaming split, cache sources).
const METRICS = `# HELP sglang:prompt_tokens_total Number of prefill tokens processed.
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{is_streaming="false",model_name="m",tp_rank="0"} 700.0
sglang:prompt_tokens_total{is_streaming="true",model_name="m",tp_rank="0"} 300.0
sglang:prompt_tokens_created{is_streaming="false",model_name="m",tp_rank="0"} 1.7e9
# TYPE sglang:cached_tokens_total counter
sglang:cached_tokens_total{cache_source="device",model_name="a {b} c",tp_rank="0"} 400.0
sglang:cached_tokens_total{cache_source="host",model_name="m",tp_rank="0"} 100.0
sglang:hicache_host_used_tokens{model_name="m",tp_rank="0"} 30.0
sglang:hicache_host_used_tokens{model_name="m",tp_rank="1"} 50.0
sglang:hicache_host_total_tokens{model_name="m",tp_rank="0"} 100.0
sglang:hicache_host_total_tokens{model_name="m",tp_rank="1"} 100.0
sglang:num_queue_reqs{model_name="m"} 3.0
`;

describe('parseRuntimeCacheSample', () => {
  it('sums the counters over their labels, skipping _created and other metrics', () => {
    expect(parseRuntimeCacheSample(METRICS)).toEqual({
      promptTokens: 1000,
      cachedTokens: 500,
      host: { usedTokens: 80, totalTokens: 200 },
    });
  });

  it('has no host tier without HiCache; zero tokens before the first request; nothing without SGLang metrics', () => {
    const dense = METRICS.split('\n')
      .filter((l) => !l.includes('hicache'))
      .join('\n');
    expect(parseRuntimeCacheSample(dense)?.host).toBeUndefined();
    // prometheus_client writes a labelled counter's first sample at its first increment.
    expect(parseRuntimeCacheSample('sglang:num_queue_reqs{tp_rank="0"} 0.0\n')).toEqual({
      promptTokens: 0,
      cachedTokens: 0,
    });
    expect(parseRuntimeCacheSample('python_gc_objects_collected_total 1\n')).toBeUndefined();
    // A cut line (no value, or an unclosed label set) is not a zero: alone, it is no reading.
    expect(
      parseRuntimeCacheSample('sglang:prompt_tokens_total{a="b"}\nsglang:cached_tokens_total{a="c\n'),
    ).toBeUndefined();
  });
});

describe('CounterWindow', () => {
  const at = (total: number, part: number) => ({ total, part });

  it('needs two readings, then gives the difference across the window', () => {
    const w = new CounterWindow(300_000);
    w.add(0, at(100, 10));
    expect(w.delta()).toBeUndefined();
    w.add(30_000, at(300, 110));
    expect(w.delta()).toEqual({ total: 200, part: 100, seconds: 30 });
  });

  it('slides: readings older than the window drop, one at its start stays', () => {
    const w = new CounterWindow(60_000);
    for (let t = 0; t <= 120_000; t += 30_000) w.add(t, at(t / 1000, 0));
    // Readings at 60, 90, 120 s: 60 s covered.
    expect(w.delta()).toEqual({ total: 60, part: 0, seconds: 60 });
  });

  it('starts again when a counter goes down (the runtime restarted)', () => {
    const w = new CounterWindow(300_000);
    w.add(0, at(5_000, 1_000));
    w.add(30_000, at(6_000, 1_500));
    w.add(60_000, at(200, 0));
    expect(w.delta()).toBeUndefined();
    w.add(90_000, at(1_200, 600));
    expect(w.delta()).toEqual({ total: 1_000, part: 600, seconds: 30 });
  });

  it('lets the figures of a source that stopped answering run out with the window', () => {
    const w = new CounterWindow(60_000);
    w.add(0, at(0, 0));
    w.add(30_000, at(100, 50));
    w.expire(70_000);
    expect(w.delta()).toBeUndefined();
    w.add(90_000, at(300, 150));
    expect(w.delta()).toEqual({ total: 200, part: 100, seconds: 60 });
  });
});
