// The API key a request presents: `Authorization: Bearer <key>`, as OpenAI
// clients send it. Pure.

import type { IncomingHttpHeaders } from 'node:http';

export type PresentedKey =
  { readonly ok: true; readonly key: string } | { readonly ok: false; readonly reason: string };

const BEARER = /^Bearer[ \t]+(\S+)[ \t]*$/i;

export function readPresentedKey(headers: Readonly<IncomingHttpHeaders>): PresentedKey {
  const value = headers.authorization;
  if (value === undefined || value === '')
    return { ok: false, reason: "send the tenant's API key as `Authorization: Bearer <key>`" };
  const match = BEARER.exec(value);
  if (!match?.[1]) return { ok: false, reason: 'the Authorization header must be `Bearer <key>`' };
  return { ok: true, key: match[1] };
}
