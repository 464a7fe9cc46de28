// A /v1/chat/completions body read by hand with exactly the result the
// ChatBody schema (shape.ts) gives it, at a small part of the cost: zod's
// loose objects copy the body, every message and every content part, on
// every request. Anything the hand reading would not take (a wrong type, a
// number out of range) returns undefined and the caller takes the schema,
// which names the error; chat-body.test.ts compares the two.

import { isBodyMessage, isObject } from '../tokenize/message-shapes.ts';
import type { ChatBody } from './shape.ts';

/** The longest cache_salt a body may carry (shape.ts's schemas read the same). */
export const CACHE_SALT_MAX = 512;
/** The highest temperature a chat or completion body may ask (shape.ts's Sampling). */
export const TEMPERATURE_MAX = 100;

/** z.number().int(): a safe integer. */
const isInt = (v: unknown): boolean => typeof v === 'number' && Number.isSafeInteger(v);

function isSampling(b: Readonly<Record<string, unknown>>): boolean {
  const { n, stream, temperature, seed, cache_salt: salt } = b;
  return (
    (n === undefined || (isInt(n) && (n as number) >= 1)) &&
    (stream === undefined || typeof stream === 'boolean') &&
    (temperature === undefined ||
      (typeof temperature === 'number' &&
        Number.isFinite(temperature) &&
        temperature >= 0 &&
        temperature <= TEMPERATURE_MAX)) &&
    (seed === undefined || isInt(seed)) &&
    (salt === undefined || (typeof salt === 'string' && salt.length <= CACHE_SALT_MAX))
  );
}

/**
 * The body as ChatBody's schema gives it, or undefined where the schema must read it. The body
 * is copied (the picker stamps the copy's salt); its messages are not (nothing writes them).
 */
export function readChatBody(raw: unknown): ChatBody | undefined {
  if (!isObject(raw)) return undefined;
  const { model, messages } = raw;
  if (typeof model !== 'string' || model.length === 0) return undefined;
  if (!Array.isArray(messages) || messages.length === 0) return undefined;
  for (const m of messages as readonly unknown[]) if (!isBodyMessage(m)) return undefined;
  if (!isSampling(raw)) return undefined;
  return { ...raw } as ChatBody;
}
