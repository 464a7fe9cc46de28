// Four clients (chat completions, half of them streamed) sending through a gateway in a loop,
// counting what a user would call lost: a 5xx, a request the gateway never answered (connection
// refused or reset), and a streamed answer that ended without its `data: [DONE]` or carried an
// error event (a cut stream). 4xx answers are counted apart (a rate limit is not a rollout's loss).

export interface LoadTarget {
  /** The gateway's base URL. */
  readonly gateway: string;
  readonly apiKey: string;
  readonly model: string;
}

export interface LoadCounts {
  sent: number;
  streamed: number;
  /** Answers with a 5xx status, by status. */
  serverErrors: Record<string, number>;
  /** Requests that got no answer at all (the error's code). */
  unanswered: Record<string, number>;
  /** 200 streams that ended early or carried an error event. */
  cutStreams: number;
  /** 4xx answers, by status. */
  clientErrors: Record<string, number>;
  /** A few examples of what was lost, for a person. */
  samples: string[];
}

export interface RunningLoad {
  stop(): Promise<LoadCounts>;
}

/** Whatever a user would count as lost. */
export function countLost(c: LoadCounts): number {
  const sum = (r: Record<string, number>): number => Object.values(r).reduce((a, b) => a + b, 0);
  return sum(c.serverErrors) + sum(c.unanswered) + c.cutStreams;
}

const bump = (r: Record<string, number>, key: string): void => void (r[key] = (r[key] ?? 0) + 1);

function errorCode(err: unknown): string {
  const cause = (err as { cause?: { code?: string } }).cause;
  return cause?.code ?? (err as Error).name;
}

/** A streamed answer whole: it ends with [DONE] and no error event came before it. */
export function isCompleteStream(text: string): boolean {
  return text.includes('data: [DONE]') && !/^data: \{"error"/m.test(text);
}

export function startLoad(target: LoadTarget, clients = 4): RunningLoad {
  let running = true;
  const counts: LoadCounts = {
    sent: 0,
    streamed: 0,
    serverErrors: {},
    unanswered: {},
    cutStreams: 0,
    clientErrors: {},
    samples: [],
  };
  const note = (what: string): void => void (counts.samples.length < 5 && counts.samples.push(what));

  async function one(client: number, i: number): Promise<void> {
    const stream = i % 2 === 1;
    counts.sent++;
    if (stream) counts.streamed++;
    let res: Response;
    try {
      res = await fetch(`${target.gateway}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${target.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          model: target.model,
          messages: [
            { role: 'user', content: `client ${client} asks question ${i % 7}: how do rollouts drain?` },
          ],
          max_tokens: stream ? 48 : 8,
          stream,
        }),
        signal: AbortSignal.timeout(120_000),
      });
    } catch (err) {
      bump(counts.unanswered, errorCode(err));
      note(`no answer: ${errorCode(err)}`);
      return;
    }
    let text: string;
    try {
      text = await res.text();
    } catch (err) {
      if (res.status === 200 && stream) {
        counts.cutStreams++;
        note(`stream cut: ${errorCode(err)}`);
      } else bump(counts.unanswered, `body ${errorCode(err)}`);
      return;
    }
    if (res.status >= 500) {
      bump(counts.serverErrors, String(res.status));
      note(`${res.status} ${text.slice(0, 160)}`);
    } else if (res.status !== 200) bump(counts.clientErrors, String(res.status));
    else if (stream && !isCompleteStream(text)) {
      counts.cutStreams++;
      note(`stream cut: ${text.slice(-160)}`);
    }
  }

  const loops = Array.from({ length: clients }, async (_, client) => {
    for (let i = 0; running; i++) await one(client, i);
  });
  return {
    async stop() {
      running = false;
      await Promise.all(loops);
      return counts;
    },
  };
}
