// What the gateway saw each endpoint do, from the answers it passed on:
// answers served, the prompt and cached tokens the runtime reported in them,
// the last error answer. Per deployment, the last error the gateway itself
// answered (no endpoint to blame: 429, 502 after retries, 503 ...).
// Plain data in, no clock inside: callers pass `at` (wall-clock ms, for people).

export interface ErrorRecord {
  /** Wall-clock milliseconds since the epoch. */
  readonly at: number;
  readonly status: number;
  readonly code: string;
  readonly message: string;
}

export interface EndpointActivity {
  served: number;
  /** Answers with a runtime cache report; the token sums below count only those. */
  reported: number;
  promptTokens: number;
  cachedTokens: number;
  lastError: ErrorRecord | undefined;
}

export interface AnswerRecord {
  readonly endpoint: string;
  readonly status: number;
  readonly report?: { readonly promptTokens: number; readonly cachedTokens: number };
  readonly error?: ErrorRecord;
}

const MAX_TRACKED = 4096;

export class ActivityRecorder {
  readonly #endpoints = new Map<string, EndpointActivity>();
  readonly #deploymentErrors = new Map<string, ErrorRecord>();

  recordAnswer(a: AnswerRecord): void {
    const e = this.#entry(a.endpoint);
    if (a.status < 400) e.served++;
    if (a.report) {
      e.reported++;
      e.promptTokens += a.report.promptTokens;
      e.cachedTokens += a.report.cachedTokens;
    }
    if (a.error) e.lastError = a.error;
  }

  recordGatewayError(deployment: string, error: ErrorRecord): void {
    this.#deploymentErrors.delete(deployment);
    this.#deploymentErrors.set(deployment, error);
    trim(this.#deploymentErrors);
  }

  endpoint(id: string): EndpointActivity | undefined {
    return this.#endpoints.get(id);
  }

  deploymentError(deployment: string): ErrorRecord | undefined {
    return this.#deploymentErrors.get(deployment);
  }

  #entry(id: string): EndpointActivity {
    let e = this.#endpoints.get(id);
    if (!e) {
      e = { served: 0, reported: 0, promptTokens: 0, cachedTokens: 0, lastError: undefined };
      this.#endpoints.set(id, e);
      // Endpoints come and go with pods: keep the memory bounded (oldest first).
      trim(this.#endpoints);
    }
    return e;
  }
}

function trim<V>(m: Map<string, V>): void {
  for (const k of m.keys()) {
    if (m.size <= MAX_TRACKED) return;
    m.delete(k);
  }
}
