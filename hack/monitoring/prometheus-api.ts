// Prometheus' HTTP query API (/api/v1/query, /api/v1/query_range), its answers
// parsed with zod: what evaluate-panels.ts and render-panels.ts ask a real Prometheus.

import { z } from 'zod';

const Answer = z.object({ status: z.string(), error: z.string().optional(), data: z.unknown().optional() });
const Labels = z.record(z.string(), z.string());
/** [unix seconds, the value as Prometheus writes it: "1.5", "NaN", "+Inf"]. */
const Sample = z.tuple([z.number(), z.string()]);
const InstantSeries = z.object({ metric: Labels, value: Sample });
const RangeSeries = z.object({ metric: Labels, values: z.array(Sample) });
export type InstantSeries = z.infer<typeof InstantSeries>;
export type RangeSeries = z.infer<typeof RangeSeries>;

const InstantData = z.discriminatedUnion('resultType', [
  z.object({ resultType: z.literal('vector'), result: z.array(InstantSeries) }),
  z.object({ resultType: z.enum(['scalar', 'string']), result: Sample }),
]);
const RangeData = z.object({ resultType: z.literal('matrix'), result: z.array(RangeSeries) });

export interface QueryRange {
  /** Unix seconds. */
  readonly start: number;
  readonly end: number;
  /** Seconds between samples. */
  readonly step: number;
}

/** The answer's data; throws with Prometheus' error. */
async function ask(prometheus: string, path: string, params: Record<string, string>): Promise<unknown> {
  const res = await fetch(`${prometheus}${path}?${new URLSearchParams(params).toString()}`);
  const answer = Answer.parse(await res.json());
  if (answer.status !== 'success') throw new Error(`${params['query']}: ${answer.error ?? answer.status}`);
  return answer.data;
}

/** The series an instant query returns now (a scalar or string answer as one series without labels). */
export async function queryInstant(prometheus: string, expr: string): Promise<InstantSeries[]> {
  const data = InstantData.parse(await ask(prometheus, '/api/v1/query', { query: expr }));
  return data.resultType === 'vector' ? data.result : [{ metric: {}, value: data.result }];
}

/** Every series a range query returns over the range. */
export async function queryRange(
  prometheus: string,
  expr: string,
  range: QueryRange,
): Promise<RangeSeries[]> {
  const { start, end, step } = range;
  const params = { query: expr, start: String(start), end: String(end), step: String(step) };
  return RangeData.parse(await ask(prometheus, '/api/v1/query_range', params)).result;
}
