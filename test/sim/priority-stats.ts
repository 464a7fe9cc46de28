// What SGLang's scheduler stats reports know of priorities, with priority scheduling on: the
// per-priority breakdown its queue gauges carry, and every priority a report has seen. Pure.

/**
 * The per-priority breakdown SGLang's queue gauges carry with priority scheduling on
 * (metrics_collector.QueueCount.from_reqs over running_batch / waiting_queue). `known` is
 * every priority its stats reports have seen (`_known_priorities`, kept at 0 once its
 * requests are gone); a report counts the running batch and the waiting queue after each
 * prefill batch and every decode_log_interval decode batches (metrics_reporter
 * report_prefill_stats, report_decode_stats), so a request alone never enters it.
 */
export interface PriorityCounts {
  readonly known: readonly number[];
  readonly running: ReadonlyMap<number, number>;
  readonly waiting: ReadonlyMap<number, number>;
}

/** A queue's requests by effective priority (priority-tally.ts), as a stats report reads them. */
export interface StatsQueue {
  readonly counts: ReadonlyMap<number, number>;
}

/** A request as the reports count it: by its effective priority. */
interface Prioritised {
  readonly priority: number;
}

export class PriorityStats {
  readonly #known = new Set<number>();
  readonly #queues: StatsQueue[] = [];
  readonly #decodeLogInterval: number;
  #decodeBatches = 0;

  /** `decodeLogInterval`: `--decode-log-interval`; 0: reports after prefill batches only. */
  constructor(decodeLogInterval: number) {
    this.#decodeLogInterval = decodeLogInterval;
  }

  /**
   * A queue the server holds outside the engine that SGLang's stats reports count beside the
   * running batch and the waiting queue: a PD prefill's bootstrap and inflight queues, a PD
   * decode's prealloc and transfer queues (metrics_reporter report_prefill_stats,
   * _update_decode_queue_stats). Its priorities become known at each report too.
   */
  countInStatsReports(queue: StatsQueue): void {
    this.#queues.push(queue);
  }

  /**
   * A stats report: the priorities of `running`, `waiting` and the server's PD queues become
   * known (metrics_collector._log_gauge_queue_count adds each gauge's to one set).
   */
  report(running: readonly Prioritised[], waiting: readonly Prioritised[]): void {
    for (const l of running) this.#known.add(l.priority);
    for (const l of waiting) this.#known.add(l.priority);
    for (const q of this.#queues) for (const p of q.counts.keys()) this.#known.add(p);
  }

  /** After a decode batch: every decode_log_interval-th one reports (report_decode_stats). */
  afterDecode(batch: readonly Prioritised[], waiting: readonly Prioritised[]): void {
    this.#decodeBatches = (this.#decodeBatches + 1) % 2 ** 30;
    const interval = this.#decodeLogInterval;
    if (interval > 0 && this.#decodeBatches % interval === 0) this.report(batch, waiting);
  }

  count(running: readonly Prioritised[], waiting: readonly Prioritised[]): PriorityCounts {
    const count = (ls: readonly Prioritised[]): Map<number, number> => {
      const out = new Map<number, number>();
      for (const l of ls) out.set(l.priority, (out.get(l.priority) ?? 0) + 1);
      return out;
    };
    return { known: [...this.#known], running: count(running), waiting: count(waiting) };
  }
}
