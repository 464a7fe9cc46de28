// Traffic for make test-monitoring's replay: conversations that share a system
// prompt (so prefixes are cached and routed to), some streamed, and answers at
// temperature 0 asked twice (so results are reused), sent through the gateway
// as the sample Tenant, a few at a time. Every answer must be a 200.

export interface ReplayOptions {
  readonly gateway: string;
  readonly apiKey: string;
  readonly models: readonly string[];
  readonly conversations: number;
  readonly turns: number;
  readonly concurrency: number;
  /** A pause between a conversation's turns (a person reading): spreads the replay over time. */
  readonly turnPauseMs?: number;
}

const SYSTEM =
  'You are the support assistant of a company that runs language models on Kubernetes. ' +
  'Answer briefly, cite the runbook section you rely on, and never invent a command.';

/**
 * One chat completion through the gateway, its answer read whole; resolves with the
 * status. Throws on any status but 200 unless `anyStatus`.
 */
export async function chat(
  to: { readonly gateway: string; readonly apiKey: string },
  body: object,
  opts: { anyStatus?: boolean } = {},
): Promise<number> {
  const res = await fetch(`${to.gateway}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${to.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status !== 200 && !opts.anyStatus)
    throw new Error(`gateway answered ${res.status}: ${text.slice(0, 300)}`);
  return res.status;
}

/** One conversation: each turn resends the history, as chat clients do. */
async function converse(opts: ReplayOptions, c: number): Promise<number> {
  const model = opts.models[c % opts.models.length] ?? '';
  const messages: { role: string; content: string }[] = [{ role: 'system', content: SYSTEM }];
  let sent = 0;
  for (let t = 0; t < opts.turns; t++) {
    messages.push({
      role: 'user',
      content: `Conversation ${c}, question ${t}: how do I drain node ${c}-${t}?`,
    });
    const deterministic = t === 0 && c % 2 === 0;
    const body = {
      model,
      messages,
      max_tokens: 16,
      temperature: deterministic ? 0 : 0.7,
      stream: t % 2 === 1,
    };
    await chat(opts, body);
    sent++;
    // The same question at temperature 0 again: the gateway may answer from the result it keeps.
    if (deterministic) {
      await chat(opts, body);
      sent++;
    }
    messages.push({ role: 'assistant', content: `Answer ${t}.` });
    if (opts.turnPauseMs) await new Promise((r) => setTimeout(r, opts.turnPauseMs));
  }
  return sent;
}

/** Resolves with the number of requests answered (all 200); throws on the first other answer. */
export async function replayConversations(opts: ReplayOptions): Promise<number> {
  let next = 0;
  let sent = 0;
  const worker = async (): Promise<void> => {
    while (next < opts.conversations) {
      const answered = await converse(opts, next++);
      sent += answered;
    }
  };
  await Promise.all(Array.from({ length: opts.concurrency }, worker));
  return sent;
}
