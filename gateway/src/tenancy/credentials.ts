// The API key a request presents: `Authorization: Bearer <key>`, as OpenAI
// clients send it. Pure.

import type { IncomingHttpHeaders } from 'node:http';

export type PresentedKey =
  { readonly ok: true; readonly key: string } | { readonly ok: false; readonly reason: string };

const BEARER = /^Bearer[ \t]+(\S+)[ \t]*$/i;

/**
 * `rawHeaders` (name, value, name, value, ...) as received: Node keeps only the first of
 * several Authorization headers, and a proxy in front may keep the last, so a request with
 * more than one is refused rather than read as either.
 */
export function readPresentedKey(
  headers: Readonly<IncomingHttpHeaders>,
  rawHeaders: readonly string[] = [],
): PresentedKey {
  let seen = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) if (rawHeaders[i]?.toLowerCase() === 'authorization') seen++;
  if (seen > 1) return { ok: false, reason: 'send one Authorization header, not several' };
  const value = headers.authorization;
  if (value === undefined || value === '')
    return { ok: false, reason: "send the tenant's API key as `Authorization: Bearer <key>`" };
  const match = BEARER.exec(value);
  if (!match?.[1]) return { ok: false, reason: 'the Authorization header must be `Bearer <key>`' };
  return { ok: true, key: match[1] };
}
