// What routing expected cached, per Deployment, since this gateway started: the
// gateway's half of the CacheHealthy comparison. Counters, not a window: the
// operator reads every replica and windows both sides alike (as it windows the
// runtimes' own counters), so a prediction and a runtime figure always cover the
// same span. `instance` changes with each start, so a reader can tell a restart
// from a quiet replica. Recording is three additions on the request path.
import { randomUUID } from 'node:crypto';

export interface PredictionTotals {
  decisions: number;
  promptTokens: number;
  predictedTokens: number;
}

export class PredictionCounters {
  readonly instance = randomUUID();
  readonly #byDeployment = new Map<string, PredictionTotals>();

  /** One routing decision to `deployment` (namespace/name) that made a prediction. */
  record(deployment: string, promptTokens: number, predictedTokens: number): void {
    let t = this.#byDeployment.get(deployment);
    if (!t) {
      t = { decisions: 0, promptTokens: 0, predictedTokens: 0 };
      this.#byDeployment.set(deployment, t);
    }
    t.decisions += 1;
    t.promptTokens += promptTokens;
    t.predictedTokens += predictedTokens;
  }

  totalsOf(deployment: string): PredictionTotals {
    return {
      ...(this.#byDeployment.get(deployment) ?? { decisions: 0, promptTokens: 0, predictedTokens: 0 }),
    };
  }

  /** Forgets Deployments no longer routed (a reader sees their counters start again if they return). */
  retain(deployments: ReadonlySet<string>): void {
    for (const d of this.#byDeployment.keys()) if (!deployments.has(d)) this.#byDeployment.delete(d);
  }
}
