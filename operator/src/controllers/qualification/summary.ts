// Per-arm summaries, GPU-hours, the verdict and the evidence level, pure, from
// the sample records. Failed requests count as failures and are left out of
// the latency distributions (a latency of a failure is not a latency); a
// failed sample still counts in the progress, never silently dropped.
import type {
  ArmStatus,
  EvidenceLevel,
  PassDistributions,
  PassSummary,
  QualificationSpec,
  QualificationVerdict,
  SamplePoint,
} from '#api/qualification.ts';
import { isSampleFailed, type PassRecord, type RequestRecord, type SampleRecord } from './record.ts';
import { bootstrapMedianDifference, computeCdf, computeQuantiles, round2 } from './stats.ts';

/** Below this many samples an arm, a cluster bootstrap has few distinct resamples: the summary says so. */
export const MIN_SAMPLES_FOR_INTERVAL = 5;
export const BOOTSTRAP = { resamples: 2000, confidence: 0.95, seed: 20261205 } as const;

type PassName = 'cold' | 'warm';

function interTokenMs(r: RequestRecord): number | undefined {
  if (r.ttftMs === undefined || r.e2eMs === undefined || (r.completionTokens ?? 0) < 2) return undefined;
  return (r.e2eMs - r.ttftMs) / ((r.completionTokens ?? 2) - 1);
}

const defined = (xs: readonly (number | undefined)[]): number[] =>
  xs.filter((x): x is number => x !== undefined);

function sum(rs: readonly RequestRecord[], f: (r: RequestRecord) => number | undefined): number {
  return rs.reduce((a, r) => a + (f(r) ?? 0), 0);
}

export function summarizePass(passes: readonly PassRecord[]): PassSummary {
  const all = passes.flatMap((p) => p.requests);
  const ok = all.filter((r) => r.ok);
  const promptTokens = sum(ok, (r) => r.promptTokens);
  const cachedTokens = sum(ok, (r) => r.cachedTokens);
  const out: PassSummary = {
    requests: all.length,
    failures: all.length - ok.length,
    promptTokens,
    completionTokens: sum(ok, (r) => r.completionTokens),
    cachedTokens,
    cachedTokensDevice: sum(ok, (r) => r.cachedDevice),
    cachedTokensHost: sum(ok, (r) => r.cachedHost),
    cachedTokensStorage: sum(ok, (r) => r.cachedStorage),
  };
  const ttftValues = defined(ok.map((r) => r.ttftMs));
  const itlValues = defined(ok.map(interTokenMs));
  const e2eValues = defined(ok.map((r) => r.e2eMs));
  const ttft = computeQuantiles(ttftValues);
  const itl = computeQuantiles(itlValues);
  const e2e = computeQuantiles(e2eValues);
  const tput = computeQuantiles(
    passes
      .filter((p) => p.wallMs > 0)
      .map(
        (p) =>
          (sum(
            p.requests.filter((r) => r.ok),
            (r) => r.completionTokens,
          ) *
            1000) /
          p.wallMs,
      ),
  );
  if (ttft) out.ttftMs = ttft;
  if (itl) out.interTokenMs = itl;
  if (e2e) out.e2eMs = e2e;
  if (tput) out.outputTokensPerSecond = tput;
  if (promptTokens > 0) out.cachedShare = round2(cachedTokens / promptTokens);
  const cdf: PassDistributions = {};
  const ttftCdf = computeCdf(ttftValues);
  const itlCdf = computeCdf(itlValues);
  const e2eCdf = computeCdf(e2eValues);
  if (ttftCdf) cdf.ttftMs = ttftCdf;
  if (itlCdf) cdf.interTokenMs = itlCdf;
  if (e2eCdf) cdf.e2eMs = e2eCdf;
  if (Object.keys(cdf).length > 0) out.cdf = cdf;
  return out;
}

function pointOf(r: SampleRecord): SamplePoint {
  const point: SamplePoint = { sample: r.sample, failed: isSampleFailed(r) };
  const of = (pass: PassRecord | undefined) => (pass ? summarizePass([pass]) : undefined);
  const cold = of(r.cold);
  const warm = of(r.warm);
  if (cold?.cachedShare !== undefined) point.coldCachedShare = cold.cachedShare;
  if (warm?.cachedShare !== undefined) point.warmCachedShare = warm.cachedShare;
  if (cold?.ttftMs) point.coldTtftP50Ms = cold.ttftMs.p50;
  if (warm?.ttftMs) point.warmTtftP50Ms = warm.ttftMs.p50;
  return point;
}

function passesOf(records: readonly SampleRecord[], pass: PassName): PassRecord[] {
  return records.flatMap((r) => (r[pass] ? [r[pass]] : []));
}

/** Decimal string with 6 places: the status holds money and hours as text, not floats. */
function decimal(x: number): string {
  return x.toFixed(6);
}

export function summarizeArm(
  spec: Pick<QualificationSpec, 'samplesPerArm' | 'pricePerGpuHour'>,
  arm: { name: string; deployment: string },
  records: readonly SampleRecord[],
  gpus: number | undefined,
  identity: { deploymentId?: string; fingerprint?: string; profile?: string },
): ArmStatus {
  const mine = records.filter((r) => r.arm === arm.name);
  const failed = mine.filter(isSampleFailed).length;
  const out: ArmStatus = {
    name: arm.name,
    deployment: arm.deployment,
    ...identity,
    samplesDone: mine.length - failed,
    samplesFailed: failed,
    progress: `${mine.length}/${spec.samplesPerArm}`,
  };
  if (mine.length === 0) return out;
  out.samples = mine.map(pointOf);
  out.cold = summarizePass(passesOf(mine, 'cold'));
  out.warm = summarizePass(passesOf(mine, 'warm'));
  if (gpus !== undefined) {
    const wallMs = mine.reduce((a, r) => a + (r.cold?.wallMs ?? 0) + (r.warm?.wallMs ?? 0), 0);
    const gpuHours = (wallMs / 3_600_000) * gpus;
    out.gpuHours = decimal(gpuHours);
    if (spec.pricePerGpuHour !== undefined)
      out.cost = decimal(gpuHours * Number.parseFloat(spec.pricePerGpuHour));
  }
  return out;
}

function metricOf(metric: string): (r: RequestRecord) => number | undefined {
  if (metric === 'EndToEnd') return (r) => r.e2eMs;
  if (metric === 'InterToken') return interTokenMs;
  return (r) => r.ttftMs;
}

/** median(arm 2) - median(arm 1) of the chosen metric and pass, with its bootstrap interval. */
export function computeVerdict(
  spec: Pick<QualificationSpec, 'arms' | 'verdict'>,
  records: readonly SampleRecord[],
): QualificationVerdict | undefined {
  const pass: PassName = spec.verdict.pass === 'Cold' ? 'cold' : 'warm';
  const value = metricOf(spec.verdict.metric);
  const groups = (arm: string) =>
    records
      .filter((r) => r.arm === arm)
      .map((r) => defined((r[pass]?.requests ?? []).filter((q) => q.ok).map(value)));
  const [a1, a2] = spec.arms;
  if (!a1 || !a2) return undefined;
  const d = bootstrapMedianDifference(groups(a1.name), groups(a2.name), BOOTSTRAP);
  if (!d) return undefined;
  const faster = d.high < 0 ? a2.name : d.low > 0 ? a1.name : 'None';
  const what = `${spec.verdict.pass.toLowerCase()} ${spec.verdict.metric} median`;
  const range = `[${d.low}, ${d.high}] ms`;
  const fewest = Math.min(groups(a1.name).length, groups(a2.name).length);
  const caveat =
    fewest < MIN_SAMPLES_FOR_INTERVAL
      ? `; only ${fewest} samples an arm: the interval is coarse, run ${MIN_SAMPLES_FOR_INTERVAL} or more`
      : '';
  const summary =
    (faster === 'None'
      ? `no difference shown: ${what} ${a2.name} - ${a1.name} = ${d.difference} ms, 95% interval ${range} holds 0 (${d.unit} resampled)`
      : `${faster} is faster: ${what} ${a2.name} - ${a1.name} = ${d.difference} ms, 95% interval ${range} (${d.unit} resampled)`) +
    caveat;
  return {
    metric: spec.verdict.metric,
    pass: spec.verdict.pass,
    medianDifferenceMs: d.difference,
    lowMs: d.low,
    highMs: d.high,
    confidence: BOOTSTRAP.confidence,
    resamples: BOOTSTRAP.resamples,
    faster,
    summary,
  };
}

/** Simulator or RealEngine, 'Mixed' when answers of both kinds are in one run, undefined before any answer. */
export function computeEvidence(records: readonly SampleRecord[]): EvidenceLevel | 'Mixed' | undefined {
  const flags = new Set(
    records
      .flatMap((r) => [...(r.cold?.requests ?? []), ...(r.warm?.requests ?? [])])
      .flatMap((q) => (q.simulator === undefined ? [] : [q.simulator])),
  );
  if (flags.size > 1) return 'Mixed';
  if (flags.has(true)) return 'Simulator';
  if (flags.has(false)) return 'RealEngine';
  return undefined;
}
