// Which shape of message content a chat template expects, decided as SGLang
// 0.5.23 decides it (parser/jinja_template_utils.py
// `detect_jinja_template_content_format`, after vLLM):
//   - 'openai' when the template mentions image/audio/video/vision anywhere, or
//     has a `for` loop over `message.content` / `msg.content` / `m.content`
//     (item or attribute access, possibly under a filter, test or slice);
//   - 'string' otherwise, and when the template cannot be parsed.
// SGLang flattens content parts to one string (joined with a space) for
// 'string' templates and hands 'openai' templates the list of parts.

import type { Template } from '@huggingface/jinja';

export const ContentFormat = { string: 'string', openai: 'openai' } as const;
export type ContentFormat = (typeof ContentFormat)[keyof typeof ContentFormat];

const MEDIA_WORDS = ['image', 'audio', 'video', 'vision'];
const MESSAGE_NAMES = ['message', 'msg', 'm'];

/** The AST nodes of @huggingface/jinja this reads; its classes are not exported. */
interface Node {
  readonly type: string;
  readonly [key: string]: unknown;
}

function isNode(v: unknown): v is Node {
  return typeof v === 'object' && v !== null && typeof (v as { type?: unknown }).type === 'string';
}

function isName(n: unknown, name: string): boolean {
  return isNode(n) && n.type === 'Identifier' && n['value'] === name;
}

/** `name['content']` or `name.content`. */
function isContentAccess(n: Node, name: string): boolean {
  if (n.type !== 'MemberExpression' || !isName(n['object'], name)) return false;
  const prop = n['property'];
  if (!isNode(prop)) return false;
  return n['computed'] === true
    ? prop.type === 'StringLiteral' && prop['value'] === 'content'
    : prop.type === 'Identifier' && prop['value'] === 'content';
}

/** Looks through what SGLang's `_is_var_or_elems_access` looks through: filters, tests, slices, `for ... if`. */
function iteratesContent(n: unknown, name: string): boolean {
  if (!isNode(n)) return false;
  switch (n.type) {
    case 'FilterExpression':
    case 'TestExpression':
      return iteratesContent(n['operand'], name);
    case 'SelectExpression':
      return iteratesContent(n['lhs'], name);
    case 'MemberExpression':
      if (isNode(n['property']) && n['property'].type === 'SliceExpression')
        return iteratesContent(n['object'], name);
      return isContentAccess(n, name);
    default:
      return false;
  }
}

function* walk(v: unknown): Generator<Node> {
  if (Array.isArray(v)) {
    for (const x of v) yield* walk(x);
  } else if (v instanceof Map) {
    for (const [k, x] of v) {
      yield* walk(k);
      yield* walk(x);
    }
  } else if (isNode(v)) {
    yield v;
    for (const x of Object.values(v)) yield* walk(x);
  }
}

export function detectContentFormat(source: string, compiled: Template | undefined): ContentFormat {
  if (MEDIA_WORDS.some((w) => source.includes(w))) return ContentFormat.openai;
  if (compiled === undefined) return ContentFormat.string;
  for (const node of walk(compiled.parsed)) {
    if (node.type !== 'For') continue;
    if (MESSAGE_NAMES.some((name) => iteratesContent(node['iterable'], name))) return ContentFormat.openai;
  }
  return ContentFormat.string;
}
