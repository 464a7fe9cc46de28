// A queue the server holds outside the engine (the PD inflight and transfer queues), counted
// by each request's effective priority: what SGLang's QueueCount.from_reqs reads of such a
// queue at a stats report (observability/metrics_collector.py), its total and its breakdown.

export class PriorityTally {
  readonly #counts = new Map<number, number>();
  #total = 0;

  add(priority: number): void {
    this.#counts.set(priority, (this.#counts.get(priority) ?? 0) + 1);
    this.#total++;
  }

  /** One request of `priority` left the queue; a priority whose last request left is dropped. */
  remove(priority: number): void {
    const n = this.#counts.get(priority) ?? 0;
    if (n <= 0) throw new RangeError(`no request of priority ${priority} in the queue`);
    if (n === 1) this.#counts.delete(priority);
    else this.#counts.set(priority, n - 1);
    this.#total--;
  }

  get total(): number {
    return this.#total;
  }

  /** The requests by priority, only priorities with at least one. */
  get counts(): ReadonlyMap<number, number> {
    return this.#counts;
  }
}
