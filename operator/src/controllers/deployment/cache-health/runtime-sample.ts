// One reading of a runtime's cache counters from its /metrics (SGLang 0.5.23,
// observability/metrics_collector.py): prompt tokens and cached prompt tokens
// (counters, summed over is_streaming, cache_source and ranks) and, with
// HiCache, the host tier's used and total tokens (gauges, summed over ranks).
import { readMetricSamples } from '#sglang/metrics-text.ts';

export interface RuntimeCacheSample {
  readonly promptTokens: number;
  readonly cachedTokens: number;
  /** Present only when the runtime runs HiCache (SGLang creates the gauges only then). */
  readonly host?: HostTier;
}

export interface HostTier {
  readonly usedTokens: number;
  readonly totalTokens: number;
}

const NAMES = {
  'sglang:prompt_tokens_total': 'promptTokens',
  'sglang:cached_tokens_total': 'cachedTokens',
  'sglang:hicache_host_used_tokens': 'hostUsed',
  'sglang:hicache_host_total_tokens': 'hostTotal',
} as const;
type Field = (typeof NAMES)[keyof typeof NAMES];

const isKnown = (name: string): name is keyof typeof NAMES => Object.hasOwn(NAMES, name);

/**
 * undefined: the text has no SGLang metric at all (not SGLang, or metrics off). A labelled
 * counter has no sample until its first increment, so a runtime that has served nothing yet
 * reads as zero tokens.
 */
export function parseRuntimeCacheSample(text: string): RuntimeCacheSample | undefined {
  const sums = new Map<Field, number>();
  let sglang = false;
  for (const { name, value } of readMetricSamples(text, (n) => n.startsWith('sglang:'))) {
    sglang = true;
    if (isKnown(name)) sums.set(NAMES[name], (sums.get(NAMES[name]) ?? 0) + value);
  }
  if (!sglang) return undefined;
  const usedTokens = sums.get('hostUsed');
  const totalTokens = sums.get('hostTotal');
  return {
    promptTokens: sums.get('promptTokens') ?? 0,
    cachedTokens: sums.get('cachedTokens') ?? 0,
    ...(usedTokens !== undefined && totalTokens !== undefined ? { host: { usedTokens, totalTokens } } : {}),
  };
}
