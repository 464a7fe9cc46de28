// Tasks in Prometheus: how many are in each phase, and the cost their statuses
// record, read from the informer's cache at scrape time (nothing to keep in step
// in the reconcile loop). The Tasks dashboard (charts/cacheroute/monitoring)
// reads them.

import { Gauge, type Registry } from 'prom-client';
import { TASK_PHASES } from '#api';

/** What the metrics read of a Task, as the informer holds it (not validated: read defensively). */
export interface TaskLike {
  readonly metadata?: { readonly namespace?: string | undefined } | undefined;
  readonly status?: { readonly phase?: string | undefined; readonly cost?: string | undefined } | undefined;
}

export interface TaskMetricsSource {
  /** Every Task the operator watches. */
  list(): readonly TaskLike[];
}

/** Phase counts per namespace (every phase present, 0 when none) and the recorded cost. */
export function summarizeTasks(tasks: readonly TaskLike[]): {
  phases: Map<string, Map<string, number>>;
  cost: Map<string, number>;
} {
  const phases = new Map<string, Map<string, number>>();
  const cost = new Map<string, number>();
  for (const t of tasks) {
    const ns = t.metadata?.namespace ?? '';
    let byPhase = phases.get(ns);
    if (!byPhase) {
      byPhase = new Map<string, number>(TASK_PHASES.map((p) => [p, 0]));
      phases.set(ns, byPhase);
    }
    const phase = t.status?.phase ?? 'Pending';
    byPhase.set(phase, (byPhase.get(phase) ?? 0) + 1);
    // status.cost is a decimal string in the price table's currency; a malformed one counts 0.
    const c = Number(t.status?.cost ?? 0);
    if (Number.isFinite(c) && c > 0) cost.set(ns, (cost.get(ns) ?? 0) + c);
  }
  return { phases, cost };
}

export function registerTaskMetrics(registry: Registry, source: TaskMetricsSource): void {
  // One summary per scrape for both gauges: a registry runs every collect() in the same
  // tick, so the summary is kept until the next microtask.
  let summary: ReturnType<typeof summarizeTasks> | undefined;
  const summarize = (): ReturnType<typeof summarizeTasks> => {
    if (summary === undefined) {
      summary = summarizeTasks(source.list());
      queueMicrotask(() => (summary = undefined));
    }
    return summary;
  };
  new Gauge({
    name: 'cacheroute_tasks',
    help: 'Tasks by namespace and phase.',
    labelNames: ['namespace', 'phase'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [namespace, byPhase] of summarize().phases)
        for (const [phase, n] of byPhase) this.set({ namespace, phase }, n);
    },
  });
  new Gauge({
    name: 'cacheroute_task_cost',
    help:
      "The sum of status.cost over the Tasks that exist, by namespace, in the price table's currency " +
      '(what budget checks were charged; deleting a Task takes its cost out of the sum).',
    labelNames: ['namespace'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [namespace, c] of summarize().cost) this.set({ namespace }, c);
    },
  });
}
