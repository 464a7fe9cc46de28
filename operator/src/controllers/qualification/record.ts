// The full record of a qualification: one JSON document per sample in the
// record ConfigMap (key `sample-<slot>.json`). Read back with zod: a key edited
// by hand is refused, not trusted.
import { z } from 'zod';

export const RequestRecord = z.object({
  id: z.string(),
  ok: z.boolean(),
  error: z.string().optional(),
  /** When it was sent, ms after its pass started (an open loop's schedule, as kept). */
  sentAtMs: z.number().optional(),
  ttftMs: z.number().optional(),
  e2eMs: z.number().optional(),
  promptTokens: z.number().int().optional(),
  completionTokens: z.number().int().optional(),
  cachedTokens: z.number().int().optional(),
  cachedDevice: z.number().int().optional(),
  cachedHost: z.number().int().optional(),
  cachedStorage: z.number().int().optional(),
  /** The answer carried the simulator's header (lib/sglang/simulator.ts). */
  simulator: z.boolean().optional(),
});
export type RequestRecord = z.infer<typeof RequestRecord>;

export const PassRecord = z.object({
  wallMs: z.number(),
  requests: z.array(RequestRecord),
});
export type PassRecord = z.infer<typeof PassRecord>;

export const SampleRecord = z.object({
  slot: z.number().int().nonnegative(),
  arm: z.string(),
  sample: z.number().int().positive(),
  salt: z.string(),
  /** The measured pod: the standalone's, or a pair's decode. */
  pod: z.string().optional(),
  /** A disaggregated arm's prefill pod, paired with `pod` for every request of the sample. */
  prefillPod: z.string().optional(),
  fingerprint: z.string().optional(),
  startedAt: z.string(),
  finishedAt: z.string().optional(),
  /** Why the whole sample failed (e.g. Interrupted); its passes are then absent or partial. */
  failed: z.string().optional(),
  cold: PassRecord.optional(),
  warm: PassRecord.optional(),
});
export type SampleRecord = z.infer<typeof SampleRecord>;

export function recordKey(slot: number): string {
  return `sample-${String(slot).padStart(3, '0')}.json`;
}

export function recordConfigMapName(qualification: string): string {
  return `qualification-${qualification}`.slice(0, 253);
}

/** The samples of a record ConfigMap's data, by slot; keys that do not parse are named in `invalid`. */
export function parseRecords(data: Readonly<Record<string, string>> | undefined): {
  records: SampleRecord[];
  invalid: string[];
} {
  const records: SampleRecord[] = [];
  const invalid: string[] = [];
  for (const [key, value] of Object.entries(data ?? {})) {
    if (!/^sample-\d+\.json$/.test(key)) continue;
    let raw: unknown;
    try {
      raw = JSON.parse(value);
    } catch {
      invalid.push(key);
      continue;
    }
    const r = SampleRecord.safeParse(raw);
    if (r.success && recordKey(r.data.slot) === key) records.push(r.data);
    else invalid.push(key);
  }
  return { records: records.sort((a, b) => a.slot - b.slot), invalid };
}

/** A sample failed as a whole (every request of it is then a failure of that sample). */
export function isSampleFailed(r: SampleRecord): boolean {
  return (
    r.failed !== undefined ||
    !r.cold ||
    !r.warm ||
    [...r.cold.requests, ...r.warm.requests].some((q) => !q.ok)
  );
}
