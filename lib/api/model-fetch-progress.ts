// Progress of a fetch as plain events (the CLI prints each as a JSON line and serves the last
// one over HTTP for the operator to show in status). Byte progress is reported at every whole
// percent of the total and at each finished file, so a 100 GB model gives about a hundred
// lines, not millions.
import { z } from 'zod';

/** Where the fetcher serves its last progress event (progress-server.ts) for the operator. */
export const FETCH_PROGRESS_PATH = '/progress';

export const FETCH_PHASES = ['checking', 'listing', 'small-files', 'weights', 'verifying'] as const;
export type FetchPhase = (typeof FETCH_PHASES)[number];

/** A progress event, as the fetcher prints it and serves it (progress-server.ts), and the operator reads it. */
export const FetchProgress = z.object({
  phase: z.enum(FETCH_PHASES),
  filesDone: z.number().int().nonnegative(),
  filesTotal: z.number().int().nonnegative(),
  bytesDone: z.number().int().nonnegative(),
  bytesTotal: z.number().int().nonnegative(),
});
export type FetchProgress = Readonly<z.infer<typeof FetchProgress>>;

export class ProgressTracker {
  readonly #emit: (p: FetchProgress) => void;
  readonly #held = new Map<string, number>();
  #phase: FetchPhase = 'checking';
  #filesDone = 0;
  #filesTotal = 0;
  #bytesDone = 0;
  #bytesTotal = 0;
  #lastPercent = -1;

  constructor(emit: (p: FetchProgress) => void) {
    this.#emit = emit;
  }

  setTotals(files: number, bytes: number): void {
    this.#filesTotal = files;
    this.#bytesTotal = bytes;
  }

  enter(phase: FetchPhase): void {
    this.#phase = phase;
    this.#report();
  }

  /** How many bytes of `path` are held now (resumed, received, or dropped back to 0). */
  setBytes(path: string, held: number): void {
    this.#bytesDone += held - (this.#held.get(path) ?? 0);
    this.#held.set(path, held);
    const percent = this.#bytesTotal > 0 ? Math.floor((100 * this.#bytesDone) / this.#bytesTotal) : 100;
    if (percent > this.#lastPercent) this.#report();
  }

  fileDone(path: string, size: number): void {
    this.#filesDone++;
    this.#bytesDone += size - (this.#held.get(path) ?? 0);
    this.#held.set(path, size);
    this.#report();
  }

  /** Everything already in place (an earlier verified fetch): one report, not one per file. */
  allDone(files: readonly { path: string; size: number }[]): void {
    for (const f of files) this.#held.set(f.path, f.size);
    this.#filesDone = files.length;
    this.#bytesDone = files.reduce((n, f) => n + f.size, 0);
    this.#report();
  }

  snapshot(): FetchProgress {
    return {
      phase: this.#phase,
      filesDone: this.#filesDone,
      filesTotal: this.#filesTotal,
      bytesDone: this.#bytesDone,
      bytesTotal: this.#bytesTotal,
    };
  }

  #report(): void {
    this.#lastPercent =
      this.#bytesTotal > 0 ? Math.floor((100 * this.#bytesDone) / this.#bytesTotal) : this.#lastPercent;
    this.#emit(this.snapshot());
  }
}
