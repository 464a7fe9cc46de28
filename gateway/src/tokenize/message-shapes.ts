// Chat messages read by hand with exactly the result the ChatMessage schema
// (messages.ts) gives them, at a small part of the cost: zod's object parsing
// copies every message and content part, on every request, after the body's
// own schema already read the same messages (request/shape.ts). Anything the
// hand reading would not take returns undefined and the caller takes the
// schema, which names the error; message-shapes.test.ts compares the two.

import type { ChatMessage } from './messages.ts';

/** What zod's z.object takes: any non-null object but an array. */
export function isObject(v: unknown): v is Readonly<Record<string, unknown>> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

const isOptionalString = (v: unknown): boolean => v === undefined || typeof v === 'string';
const isNullishString = (v: unknown): boolean => v === undefined || v === null || typeof v === 'string';

/** A message's `content` as the schemas take it: a string, null, absent, or text-bearing parts. */
export function isChatContent(content: unknown): boolean {
  if (content === undefined || content === null || typeof content === 'string') return true;
  if (!Array.isArray(content)) return false;
  for (const part of content as readonly unknown[])
    if (!isObject(part) || typeof part['type'] !== 'string' || !isOptionalString(part['text'])) return false;
  return true;
}

/** A non-empty role and readable content: what the request body's own Message schema checks. */
export function isBodyMessage(m: unknown): boolean {
  return isObject(m) && typeof m['role'] === 'string' && m['role'].length > 0 && isChatContent(m['content']);
}

function isChatMessage(m: unknown): boolean {
  return (
    isBodyMessage(m) &&
    isNullishString((m as Record<string, unknown>)['name']) &&
    isNullishString((m as Record<string, unknown>)['tool_call_id']) &&
    isNullishString((m as Record<string, unknown>)['reasoning_content'])
  );
}

/**
 * The messages themselves (no copy: the template reads them, never writes) when ChatMessage's
 * schema would take every one unchanged; undefined otherwise.
 */
export function readChatMessages(messages: readonly unknown[]): readonly ChatMessage[] | undefined {
  for (const m of messages) if (!isChatMessage(m)) return undefined;
  return messages as readonly ChatMessage[];
}
