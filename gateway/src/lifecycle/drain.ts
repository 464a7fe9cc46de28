// A replica's drain: once begun, readiness is false and new requests are
// refused (503 GW_DRAINING); the requests already taken are counted until
// their responses close, so shutdown can wait for them up to a grace period.

export class Drain {
  #draining = false;
  #inFlight = 0;
  #idle: (() => void)[] = [];

  get draining(): boolean {
    return this.#draining;
  }

  /** Requests taken and not yet closed. */
  get inFlight(): number {
    return this.#inFlight;
  }

  /** Stop taking requests (idempotent). */
  begin(): void {
    this.#draining = true;
  }

  /** Count a request taken; the returned function (call it once) counts it closed. */
  enter(): () => void {
    this.#inFlight++;
    let left = false;
    return () => {
      if (left) return;
      left = true;
      this.#inFlight--;
      if (this.#inFlight === 0) for (const wake of this.#idle.splice(0)) wake();
    };
  }

  /** Resolves true once no request is in flight, or false when `timeoutMs` passes first. */
  waitIdle(timeoutMs: number): Promise<boolean> {
    if (this.#inFlight === 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const wake = (): void => {
        clearTimeout(timer);
        resolve(true);
      };
      const timer = setTimeout(() => {
        this.#idle = this.#idle.filter((w) => w !== wake);
        resolve(false);
      }, timeoutMs);
      this.#idle.push(wake);
    });
  }
}
