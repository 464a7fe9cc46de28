// SGLang 0.5.23's /generate `meta_info`, key for key (managers/tokenizer_manager.py
// _handle_batch_output, observability/req_time_stats.py convert_to_output_meta_info,
// scheduler_components/output_streamer.py get_cached_tokens_details). Pure.
//
// - Always: id, finish_reason, prompt_tokens, weight_version, num_retractions,
//   reasoning_tokens, completion_tokens, cached_tokens, cached_tokens_details
//   (null when nothing was cached, else {device, host}, plus storage and
//   storage_backend with an L3 tier), dp_rank (null on a
//   server without DP ranks).
// - With --enable-metrics, the scheduler's timings: storage_prefetch_wait,
//   storage_staging_wait, forward_entry_time, prefill_finished_time, queue_time.
// - On the finished answer: weight_versions and e2e_latency; with metrics also
//   request_received_ts, first_token_latency, api_server_dispatch_finish_ts,
//   request_finished_ts, decode_throughput.
// - On the finished answer and a stream's first chunk, metrics or not:
//   response_sent_to_client_ts.

import type { FinishReason } from './generation.ts';

/** A request's times, in seconds since the epoch (queue time a duration). */
export interface RequestTimes {
  readonly receivedAt: number;
  readonly forwardEntryAt: number;
  readonly prefillFinishedAt: number;
  readonly firstTokenAt: number;
  readonly finishedAt: number;
}

export type MetaStage = 'first' | 'middle' | 'final';

export interface MetaInfoInput {
  readonly rid: string;
  readonly finish: FinishReason | null;
  readonly promptTokens: number;
  readonly completionTokens: number;
  readonly cachedDevice: number;
  readonly cachedHost: number;
  /** Loaded from the L3 tier; absent without one. */
  readonly cachedStorage?: number;
  /** The L3 backend's class name (HiCacheFile) when the server has one: details then carry storage. */
  readonly storageBackend?: string | null;
  readonly times: RequestTimes;
  readonly stage: MetaStage;
  readonly enableMetrics: boolean;
  /** The DP rank that served it; null without DP ranks (dp_size 1). */
  readonly dpRank: number | null;
}

const WEIGHT_VERSION = 'default';

/**
 * output_streamer.get_cached_tokens_details: {device, host}, and with a storage backend also
 * `storage` (0 included) and `storage_backend` (its class name).
 */
function buildCachedDetails(m: MetaInfoInput): Record<string, unknown> {
  const details: Record<string, unknown> = { device: m.cachedDevice, host: m.cachedHost };
  if (m.storageBackend) {
    details['storage'] = m.cachedStorage ?? 0;
    details['storage_backend'] = m.storageBackend;
  }
  return details;
}

export function buildMetaInfo(m: MetaInfoInput): Record<string, unknown> {
  const t = m.times;
  const final = m.stage === 'final';
  const cached = m.cachedDevice + m.cachedHost + (m.cachedStorage ?? 0);
  const meta: Record<string, unknown> = {
    id: m.rid,
    finish_reason: m.finish,
    prompt_tokens: m.promptTokens,
    weight_version: WEIGHT_VERSION,
    num_retractions: 0,
  };
  if (m.enableMetrics) {
    Object.assign(meta, {
      storage_prefetch_wait: 0,
      storage_staging_wait: 0,
      forward_entry_time: t.forwardEntryAt,
      prefill_finished_time: t.prefillFinishedAt,
      queue_time: Math.max(0, t.forwardEntryAt - t.receivedAt),
    });
  }
  meta['reasoning_tokens'] = 0;
  meta['completion_tokens'] = m.completionTokens;
  meta['cached_tokens'] = cached;
  if (final) {
    meta['weight_versions'] = [{ version: WEIGHT_VERSION, start: 0, end: m.completionTokens }];
  }
  meta['cached_tokens_details'] = cached > 0 ? buildCachedDetails(m) : null;
  meta['dp_rank'] = m.dpRank;
  if (final) meta['e2e_latency'] = t.finishedAt - t.receivedAt;
  // Set by the tokenizer manager on the finished answer (and a stream's first chunk), metrics
  // or not (managers/tokenizer_manager.py _wait_one_response).
  const sent = final || m.stage === 'first';
  if (!m.enableMetrics) {
    if (sent) meta['response_sent_to_client_ts'] = t.finishedAt;
    return meta;
  }
  if (final) {
    meta['request_received_ts'] = t.receivedAt;
    if (t.firstTokenAt > t.receivedAt) meta['first_token_latency'] = t.firstTokenAt - t.receivedAt;
    meta['api_server_dispatch_finish_ts'] = t.receivedAt;
    meta['request_finished_ts'] = t.finishedAt;
    const decodeSeconds = t.finishedAt - t.firstTokenAt;
    if (m.completionTokens > 1 && decodeSeconds > 0) {
      meta['decode_throughput'] = (m.completionTokens - 1) / decodeSeconds;
    }
  }
  if (sent) meta['response_sent_to_client_ts'] = t.finishedAt;
  return meta;
}
