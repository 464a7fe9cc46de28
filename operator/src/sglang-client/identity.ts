import { z } from 'zod';
import { KvEventsAdvert } from '#api/publishers.ts';
import { UNSTAMPED_RUNTIME_PRIORITY } from '#api/deployment-engine.ts';

/**
 * The parts of SGLang's `/server_info` (legacy `/get_server_info`) that identify
 * a runtime: its launch arguments by ServerArgs field name, plus `version`.
 * Loose on purpose: the response carries every server arg, and new releases add
 * more; we read only what identity needs.
 */
export const ServerInfo = z.looseObject({
  model_path: z.string(),
  served_model_name: z.string().nullish(),
  tokenizer_path: z.string().nullish(),
  version: z.string().nullish(),
  tp_size: z.number().int().nullish(),
  dp_size: z.number().int().nullish(),
  page_size: z.number().int().nullish(),
  disable_radix_cache: z.boolean().nullish(),
  enable_hierarchical_cache: z.boolean().nullish(),
  enable_hisparse: z.boolean().nullish(),
  disaggregation_mode: z.string().nullish(),
  disaggregation_decode_enable_radix_cache: z.boolean().nullish(),
  disaggregation_bootstrap_port: z.number().int().nullish(),
  max_total_num_tokens: z.number().int().nullish(),
  enable_priority_scheduling: z.boolean().nullish(),
  disable_priority_preemption: z.boolean().nullish(),
  schedule_low_priority_values_first: z.boolean().nullish(),
  default_priority_value: z.number().int().nullish(),
  // A block we cannot read costs the gateway its exact index, not the runtime its verification.
  kv_events: KvEventsAdvert.nullish().catch(null),
  // In clear (to a caller that sent it): checked by checkReportedApiKey, never copied anywhere.
  api_key: z.string().nullish().catch(null),
});
export type ServerInfo = z.infer<typeof ServerInfo>;

/** `/model_info` (legacy `/get_model_info`). */
export const ModelInfo = z.looseObject({
  model_path: z.string(),
  tokenizer_path: z.string().nullish(),
  is_generation: z.boolean().nullish(),
  weight_version: z.string().nullish(),
  model_type: z.string().nullish(),
  architectures: z.array(z.string()).nullish(),
});
export type ModelInfo = z.infer<typeof ModelInfo>;

/** What a runtime says it is, in the shape Deployment status publishes. */
export interface RuntimeIdentity {
  modelPath: string;
  servedModelName: string;
  tokenizerPath: string;
  version: string;
  hicache: boolean;
  hisparse: boolean;
  radixCache: boolean;
  disaggregationMode: string;
  tensorParallel: number;
  /**
   * It orders its queue by a stamped priority as the gateway stamps it: priority scheduling on,
   * preemption off, the larger value first, an unstamped request at UNSTAMPED_RUNTIME_PRIORITY (ADR 0057).
   */
  priorityScheduling: boolean;
}

/**
 * SGLang's own defaults fill what a server leaves out: a served name and a
 * tokenizer default to the model path; a decode server keeps no radix cache
 * unless asked (`--disaggregation-decode-enable-radix-cache`).
 */
export function computeRuntimeIdentity(server: ServerInfo, model: ModelInfo): RuntimeIdentity {
  const mode = server.disaggregation_mode ?? 'null';
  const radixCache =
    mode === 'decode'
      ? server.disaggregation_decode_enable_radix_cache === true && server.disable_radix_cache !== true
      : server.disable_radix_cache !== true;
  return {
    modelPath: model.model_path,
    servedModelName: server.served_model_name ?? server.model_path,
    tokenizerPath: model.tokenizer_path ?? server.tokenizer_path ?? server.model_path,
    version: server.version ?? '',
    hicache: server.enable_hierarchical_cache === true,
    hisparse: server.enable_hisparse === true,
    radixCache,
    disaggregationMode: mode,
    tensorParallel: server.tp_size ?? 1,
    priorityScheduling: isOrderedByStampedPriority(server),
  };
}

/**
 * SGLang 0.5.23's priority scheduling as the gateway's stamp needs it (managers/scheduler.py
 * Scheduler._set_or_validate_priority, schedule_policy.SchedulePolicy._sort_by_priority_and_fcfs):
 * on, without preemption, the larger value first (no --schedule-low-priority-values-first), and
 * a request without a priority at UNSTAMPED_RUNTIME_PRIORITY (--default-priority-value;
 * tokenizer_manager._set_default_priority), not after every stamp. A runtime on but other than
 * that reports false, so a Deployment that declared it is unverified.
 */
function isOrderedByStampedPriority(server: ServerInfo): boolean {
  return (
    server.enable_priority_scheduling === true &&
    server.disable_priority_preemption === true &&
    server.schedule_low_priority_values_first !== true &&
    server.default_priority_value === UNSTAMPED_RUNTIME_PRIORITY
  );
}

export interface IdentityMismatch {
  field: keyof RuntimeIdentity;
  declared: string | number | boolean;
  reported: string | number | boolean;
}

/** Pure comparison of what was declared (rendered) with what a runtime reported. */
export function compareIdentity(declared: RuntimeIdentity, reported: RuntimeIdentity): IdentityMismatch[] {
  const fields = Object.keys(declared) as (keyof RuntimeIdentity)[];
  return fields
    .filter((f) => declared[f] !== reported[f])
    .map((f) => ({ field: f, declared: declared[f], reported: reported[f] }));
}

export function formatMismatches(mismatches: readonly IdentityMismatch[]): string {
  return mismatches
    .map((m) => `${m.field}: declared ${String(m.declared)}, runtime reports ${String(m.reported)}`)
    .join('; ');
}
