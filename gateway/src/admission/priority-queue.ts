// A queue that serves the highest priority first and arrivals in order within
// one priority. Each distinct priority is a level with its own doubly linked
// FIFO, so taking the next, dropping the newest of the lowest and leaving from
// the middle (a timeout, an abort) are O(1); only opening or closing a level
// touches the sorted array of levels, which holds a handful of priorities.

/** A place in the queue: hand it back to `remove` to leave before being served. */
export interface QueueEntry<T> {
  readonly value: T;
  readonly priority: number;
}

class Node<T> implements QueueEntry<T> {
  readonly value: T;
  readonly priority: number;
  prev: Node<T> | undefined;
  next: Node<T> | undefined;
  /** The level holding this node; undefined once it has left the queue. */
  level: Level<T> | undefined;

  constructor(value: T, priority: number, level: Level<T>) {
    this.value = value;
    this.priority = priority;
    this.level = level;
  }
}

interface Level<T> {
  readonly priority: number;
  oldest: Node<T> | undefined;
  newest: Node<T> | undefined;
}

export class PriorityQueue<T> {
  /** Non-empty levels, lowest priority first. */
  #levels: Level<T>[] = [];
  #byPriority = new Map<number, Level<T>>();
  #size = 0;

  get size(): number {
    return this.#size;
  }

  /** The lowest priority waiting, or undefined when empty. */
  get lowestPriority(): number | undefined {
    return this.#levels[0]?.priority;
  }

  push(value: T, priority: number): QueueEntry<T> {
    const level = this.#byPriority.get(priority) ?? this.#openLevel(priority);
    const node = new Node(value, priority, level);
    node.prev = level.newest;
    if (level.newest) level.newest.next = node;
    else level.oldest = node;
    level.newest = node;
    this.#size++;
    return node;
  }

  /** The oldest entry of the highest priority, left in the queue. */
  peek(): T | undefined {
    return this.#levels.at(-1)?.oldest?.value;
  }

  /** Takes the oldest entry of the highest priority. */
  shift(): T | undefined {
    const node = this.#levels.at(-1)?.oldest;
    if (!node) return undefined;
    this.#unlink(node);
    return node.value;
  }

  /** Takes the newest entry of the lowest priority: the one that has least claim to its place. */
  popNewestOfLowest(): T | undefined {
    const node = this.#levels[0]?.newest;
    if (!node) return undefined;
    this.#unlink(node);
    return node.value;
  }

  /** Takes `entry` out of the queue; false when it had already left. */
  remove(entry: QueueEntry<T>): boolean {
    if (!this.#holds(entry)) return false;
    this.#unlink(entry);
    return true;
  }

  /** Empties the queue, returning what it held, highest priority first. */
  takeAll(): T[] {
    const all: T[] = [];
    for (let i = this.#levels.length - 1; i >= 0; i--)
      for (let n = this.#levels[i]?.oldest; n; n = n.next) {
        n.level = undefined;
        all.push(n.value);
      }
    this.#levels = [];
    this.#byPriority.clear();
    this.#size = 0;
    return all;
  }

  #holds(entry: QueueEntry<T>): entry is Node<T> {
    return (
      entry instanceof Node &&
      entry.level !== undefined &&
      this.#byPriority.get(entry.priority) === entry.level
    );
  }

  #unlink(node: Node<T>): void {
    const level = node.level;
    if (!level) return;
    if (node.prev) node.prev.next = node.next;
    else level.oldest = node.next;
    if (node.next) node.next.prev = node.prev;
    else level.newest = node.prev;
    node.prev = node.next = node.level = undefined;
    this.#size--;
    if (!level.oldest) this.#closeLevel(level);
  }

  #openLevel(priority: number): Level<T> {
    const level: Level<T> = { priority, oldest: undefined, newest: undefined };
    this.#levels.splice(this.#levelIndex(priority), 0, level);
    this.#byPriority.set(priority, level);
    return level;
  }

  #closeLevel(level: Level<T>): void {
    this.#levels.splice(this.#levelIndex(level.priority), 1);
    this.#byPriority.delete(level.priority);
  }

  /** Binary search: the index of `priority` among the levels, or where it would go. */
  #levelIndex(priority: number): number {
    let lo = 0;
    let hi = this.#levels.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((this.#levels[mid] as Level<T>).priority < priority) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}
