// The messages a chat template sees, built from a /v1/chat/completions
// request's messages the way SGLang 0.5.23 builds them
// (entrypoints/openai/serving_chat.py `_apply_jinja_template`):
//   1. each message as its pydantic model dumps it: a user message keeps role
//      and content only; other roles (lower-cased) also keep tool_call_id,
//      name and reasoning_content; null fields are dropped, null content is "";
//   2. content parts by the template's content format: 'string' joins the
//      text parts with a space; 'openai' keeps [{type: 'text', text}] (and
//      moves content last, as SGLang rebuilds the dict); thinking parts are
//      dropped; any media part is refused here (the gateway has no processor);
//   3. a tool message whose parts are all text becomes their space-joined text;
//   4. a final assistant message with string content becomes a user message
//      (SGLang does so whenever continue_final_message is off).
// Not replicated: tool_calls, tools and documents (SGLang passes them to the
// template after normalising them), continue_final_message, and templates
// SGLang replaces with a Python encoder (DeepSeek V3.2/V4, Kimi K3, GLM 5.3)
// or a named conversation template.

import { z } from 'zod';
import type { ContentFormat } from './content-format.ts';
import type { ChatIssue, Result } from './issues.ts';

const ContentPart = z.looseObject({ type: z.string(), text: z.string().optional() });

export const ChatMessage = z.looseObject({
  role: z.string().min(1),
  content: z.union([z.string(), z.array(ContentPart), z.null()]).optional(),
  name: z.string().nullish(),
  tool_call_id: z.string().nullish(),
  reasoning_content: z.string().nullish(),
});
export type ChatMessage = z.infer<typeof ChatMessage>;

export type TemplateMessage = Readonly<Record<string, unknown>>;

// SGLang's generic message roles, matched case-insensitively; `user` is its own model and exact.
const GENERIC_ROLES = new Set([
  'system',
  'assistant',
  'tool',
  'function',
  'developer',
  'latest_reminder',
  'root',
]);
const DROPPED_PARTS = new Set(['thinking', 'reasoning']);

type Content = string | readonly { type: 'text'; text: string }[];

function prepareContent(
  content: ChatMessage['content'],
  format: ContentFormat,
  at: number,
): Result<Content, ChatIssue> {
  if (content === null || content === undefined) return { ok: true, value: '' };
  if (typeof content === 'string') return { ok: true, value: content };
  const texts: string[] = [];
  for (const [j, part] of content.entries()) {
    if (part.type === 'text' && part.text !== undefined) texts.push(part.text);
    else if (!DROPPED_PARTS.has(part.type)) {
      const path = `messages.${at}.content.${j}`;
      return {
        ok: false,
        error: {
          code: 'unsupported-content',
          path,
          message: `${path}: content part '${part.type}' has no text form`,
        },
      };
    }
  }
  if (format === 'string') return { ok: true, value: texts.join(' ') };
  return { ok: true, value: texts.map((text) => ({ type: 'text' as const, text })) };
}

function buildMessage(m: ChatMessage, content: Content, format: ContentFormat): Record<string, unknown> {
  const lower = m.role.toLowerCase();
  if (m.role === 'user' || !GENERIC_ROLES.has(lower)) return { role: m.role, content };
  // Field order is pydantic's; an 'openai' template gets content last, as SGLang rebuilds the dict.
  const rest: Record<string, unknown> = {};
  if (m.tool_call_id != null) rest['tool_call_id'] = m.tool_call_id;
  if (m.name != null) rest['name'] = m.name;
  if (m.reasoning_content != null) rest['reasoning_content'] = m.reasoning_content;
  const moved = format === 'openai' && Array.isArray(m.content);
  const out: Record<string, unknown> = moved
    ? { role: lower, ...rest, content }
    : { role: lower, content, ...rest };
  if (lower === 'tool' && typeof content !== 'string') out['content'] = content.map((p) => p.text).join(' ');
  return out;
}

export function prepareMessages(
  messages: readonly ChatMessage[],
  format: ContentFormat,
): Result<TemplateMessage[], ChatIssue> {
  const out: Record<string, unknown>[] = [];
  for (const [i, m] of messages.entries()) {
    const content = prepareContent(m.content, format, i);
    if (!content.ok) return content;
    out.push(buildMessage(m, content.value, format));
  }
  const last = out.at(-1);
  if (last?.['role'] === 'assistant' && typeof last['content'] === 'string')
    out[out.length - 1] = { role: 'user', content: last['content'] };
  return { ok: true, value: out };
}
