// What the status page plots of each Qualification, read from its status
// alone (ADR 0040): per arm and pass the latency distributions the operator
// stored as quantile curves, and the cached-token share of every sample. The
// status is another program's output, so it is parsed with the API's zod
// schema; an object whose status does not parse is an issue, not a plot.
import { z } from 'zod';
import { CDF_STEPS, QualificationStatus, SamplePoint } from '#api/qualification.ts';
import type { KubeObject } from '#kube/objects.ts';

/** At most this many Qualifications are drawn (the newest first): the page stays small. */
export const MAX_QUALIFICATIONS_SHOWN = 12;

const Curve = z
  .array(z.number())
  .length(CDF_STEPS + 1)
  .nullable();

export const PassCurves = z.object({
  ttftMs: Curve,
  interTokenMs: Curve,
  e2eMs: Curve,
});

export const ArmPlotData = z.object({
  name: z.string(),
  profile: z.string().nullable(),
  cold: PassCurves.nullable(),
  warm: PassCurves.nullable(),
  /** One point a sample, in order (cached share of its cold and warm pass). */
  samples: z.array(SamplePoint),
});

export const QualificationView = z.object({
  namespace: z.string(),
  name: z.string(),
  createdAt: z.string().nullable(),
  phase: z.string().nullable(),
  evidence: z.string().nullable(),
  progress: z.string().nullable(),
  verdict: z.string().nullable(),
  arms: z.array(ArmPlotData),
});

export type PassCurves = z.infer<typeof PassCurves>;
export type ArmPlotData = z.infer<typeof ArmPlotData>;
export type QualificationView = z.infer<typeof QualificationView>;

export interface QualificationIssue {
  /** `Qualification namespace/name`. */
  readonly path: string;
  readonly message: string;
}

type PassSummary = NonNullable<NonNullable<QualificationStatus['arms']>[number]['cold']>;

function curvesOf(pass: PassSummary | undefined): PassCurves | null {
  if (!pass?.cdf) return null;
  return {
    ttftMs: pass.cdf.ttftMs ?? null,
    interTokenMs: pass.cdf.interTokenMs ?? null,
    e2eMs: pass.cdf.e2eMs ?? null,
  };
}

/** The plot data of Qualification objects as the informer holds them, newest first. */
export function buildQualificationViews(objects: readonly KubeObject[]): {
  views: QualificationView[];
  issues: QualificationIssue[];
} {
  const views: QualificationView[] = [];
  const issues: QualificationIssue[] = [];
  for (const obj of objects) {
    const namespace = obj.metadata?.namespace ?? '';
    const name = obj.metadata?.name ?? '';
    const parsed = QualificationStatus.safeParse(obj['status'] ?? {});
    if (!parsed.success) {
      const first = parsed.error.issues[0];
      issues.push({
        path: `Qualification ${namespace}/${name}`,
        message: `status does not parse: ${first?.path.join('.') ?? ''}: ${first?.message ?? ''}`,
      });
      continue;
    }
    const s = parsed.data;
    views.push({
      namespace,
      name,
      createdAt: obj.metadata?.creationTimestamp ?? null,
      phase: s.phase ?? null,
      evidence: s.evidence ?? null,
      progress: s.progress ?? null,
      verdict: s.verdict?.summary ?? null,
      arms: (s.arms ?? []).map((a) => ({
        name: a.name,
        profile: a.profile ?? null,
        cold: curvesOf(a.cold),
        warm: curvesOf(a.warm),
        samples: a.samples ?? [],
      })),
    });
  }
  views.sort(
    (a, b) =>
      (b.createdAt ?? '').localeCompare(a.createdAt ?? '') ||
      `${a.namespace}/${a.name}`.localeCompare(`${b.namespace}/${b.name}`),
  );
  return { views: views.slice(0, MAX_QUALIFICATIONS_SHOWN), issues };
}
