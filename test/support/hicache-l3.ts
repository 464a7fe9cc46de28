// HiCache with an L3 tier as the real-SGLang suites start it (conformance: differential,
// first request, mooncake; e2e through the operator: real-sglang-l3.ts): the tiny model in
// pages of 16 tokens, a host tier of twice the device pool written through, and the prompt
// whose prefix one server computes and another loads from L3.

export const L3_PAGE = 16;
// The tiny model's tokenizer was trained on this sentence: about ten tokens a copy.
export const L3_SENTENCE = 'the quick brown fox jumps over the lazy dog ';
/** About 370 tokens: past SGLang's default prefetch threshold (256). */
export const L3_PROMPT = `A handbook chapter. ${L3_SENTENCE.repeat(36)}`;

/** The prompt's cacheable pages: SGLang always computes the last token. */
export const cacheable = (promptTokens: number): number => Math.floor((promptTokens - 1) / L3_PAGE) * L3_PAGE;

export interface HicacheL3Options {
  readonly backend: 'file' | 'mooncake';
  /** --hicache-storage-prefetch-policy; SGLang's default (timeout) when absent. */
  readonly prefetchPolicy?: 'wait_complete' | 'best_effort' | 'timeout';
  /** --enable-metrics (the suites that read /metrics). */
  readonly metrics?: boolean;
  /** --hicache-storage-backend-extra-config, e.g. a prefetch_threshold. */
  readonly extraConfig?: Readonly<Record<string, unknown>>;
}

/** The server arguments (without --model-path, --host, --port) of a HiCache server with L3. */
export function buildHicacheL3Args(o: HicacheL3Options): string[] {
  return [
    '--served-model-name',
    'tiny',
    '--page-size',
    String(L3_PAGE),
    '--max-total-tokens',
    '2048',
    ...(o.metrics ? ['--enable-metrics'] : []),
    '--enable-cache-report',
    '--enable-hierarchical-cache',
    '--hicache-ratio',
    '2',
    '--hicache-write-policy',
    'write_through',
    '--hicache-storage-backend',
    o.backend,
    ...(o.prefetchPolicy ? ['--hicache-storage-prefetch-policy', o.prefetchPolicy] : []),
    ...(o.extraConfig ? ['--hicache-storage-backend-extra-config', JSON.stringify(o.extraConfig)] : []),
  ];
}
