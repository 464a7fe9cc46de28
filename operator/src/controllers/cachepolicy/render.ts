// How the runtime renders a warm-up document, and whether that rendering
// changes from one day to the next.
//
// A warm-up is worth something only when real chat requests start with the
// same tokens (warmup.ts). The runtime renders both with its chat template; a
// template that writes the date before the system message (Llama 3.x:
// "Today Date: <date_string>", from strftime_now when the caller gives none)
// renders a different prefix every day, so yesterday's cached copy of a
// document, on a replica or in the shared L3 tier, matches nothing today: the
// CacheRoute log saw exactly this (its LMCache keys did not survive a
// container cycle). Two checks, both through the runtime's own /tokenize:
// - rendered with two different `date_string`s: a template that reads the
//   variable diverges, and the warm-up says from which token;
// - the digest of the rendering is kept with an L3 delivery: a replica that
//   renders the documents differently (the day turned under a strftime_now
//   template, another tokenizer) is prefilled again instead of trusting L3.
import { createHash } from 'node:crypto';
import type { ClientOptions } from '../../sglang-client/client.ts';
import { postTokenizeMessages } from '../../sglang-client/generate.ts';

/** Two days: any template that writes `date_string` renders them differently. */
const PROBE_DATES = ['01 Jan 2001', '02 Feb 2002'] as const;

export type Rendered = { ok: true; tokens: readonly number[] } | { ok: false; error: string };

const asSystem = (document: string) => [{ role: 'system', content: document }];

/** The document as the system message of a chat completion, in the runtime's token ids. */
export async function renderDocument(url: string, document: string, opts: ClientOptions): Promise<Rendered> {
  const r = await postTokenizeMessages(url, asSystem(document), opts);
  return r.ok ? { ok: true, tokens: r.value.tokens } : { ok: false, error: r.error };
}

/** Index of the first token where the two renderings differ; their length when one is a prefix of the other. */
export function firstDifference(a: readonly number[], b: readonly number[]): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i;
  return a.length === b.length ? -1 : n;
}

/**
 * Undefined when the rendering does not depend on `date_string`; otherwise why it matters: a
 * request on another day shares only the tokens before the first difference.
 */
export async function checkDateVariance(
  url: string,
  name: string,
  document: string,
  opts: ClientOptions,
): Promise<string | undefined> {
  const renders = await Promise.all(
    PROBE_DATES.map((d) =>
      postTokenizeMessages(url, asSystem(document), { ...opts, chatTemplateKwargs: { date_string: d } }),
    ),
  );
  const [a, b] = renders;
  // A runtime that refuses the variable tells nothing here; the digest check still catches a change.
  if (!a?.ok || !b?.ok) return undefined;
  const at = firstDifference(a.value.tokens, b.value.tokens);
  if (at < 0) return undefined;
  return (
    `${name}: the chat template writes date_string into the prompt (Llama 3.x "Today Date"): rendered ` +
    `with two dates, the ${a.value.tokens.length} tokens differ from token ${at}; where the template takes ` +
    `the day's date (strftime_now), a request on another day shares only ${at} tokens with this warm-up: ` +
    'put the date after the system message, or take it out of the template'
  );
}

/** sha256 of the documents' token ids, in order: what an L3 delivery was computed from. */
export function digestRenderings(renderings: readonly (readonly number[])[]): string {
  const h = createHash('sha256');
  for (const r of renderings) h.update(`${r.join(',')};`);
  return h.digest('hex');
}
