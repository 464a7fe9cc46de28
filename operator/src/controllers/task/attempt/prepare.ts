// The exact input a provider receives, built from the frozen spec.
//
// Chat messages go to every provider as messages: the model's own chat
// template renders them, never a home-made one (a home-made rendering is not
// what the model was trained on, and it never shares a cached prefix with the
// gateway's chat requests, which SGLang renders with its template).
//   SGLang: the runtime renders and tokenizes them itself (its /tokenize takes
//     `messages` and renders them as for a chat completion, SGLang 0.5.23
//     serving_tokenize.py); those ids are counted against the budget and sent
//     to /generate.
//   OpenRouter: Chat Completions applies the model's template upstream.
// A plain `prompt` (or a ConfigMap's text) is sent to SGLang unchanged as text
// (RENDERING): a model that needs a template should be given `messages`; to
// OpenRouter it becomes one user message.
//
// Rework appends every reviewer feedback so far, in order, as a user message
// ("Reviewer feedback on the previous answer:\n<feedback>"); for a plain prompt
// the same text follows after a blank line. The rejected answers themselves are
// not replayed: status keeps only their hashes, and the feedback says what to change.
import type { z } from 'zod';
import type { ChatMessage, TaskSpec } from '#api/task.ts';
import { err, ok, type Result } from './types.ts';

export const RENDERING = 'cacheroute-plain-v1';
export const FEEDBACK_PREFIX = 'Reviewer feedback on the previous answer:\n';

export type Message = z.infer<typeof ChatMessage>;
export type ProviderKind = 'sglang' | 'openrouter';

export type PreparedInput =
  { kind: 'text'; rendering: typeof RENDERING; text: string } | { kind: 'messages'; messages: Message[] };

export interface PrepareError {
  code: 'InputUnavailable';
  path: string;
  message: string;
}

/**
 * `inputText` is the referenced ConfigMap value for `input.configMapRef`
 * (the shell reads it); `feedback` is every rework feedback so far, oldest first.
 */
export function buildPreparedInput(
  spec: Pick<TaskSpec, 'input'>,
  provider: ProviderKind,
  opts: { inputText?: string | undefined; feedback?: readonly string[] } = {},
): Result<PreparedInput, PrepareError> {
  const feedback = (opts.feedback ?? []).map((f) => FEEDBACK_PREFIX + f);
  const { prompt, messages, configMapRef } = spec.input;
  let text: string | undefined = prompt;
  if (configMapRef) {
    if (opts.inputText === undefined)
      return err({
        code: 'InputUnavailable',
        path: 'spec.input.configMapRef',
        message: `ConfigMap ${configMapRef.name} key ${configMapRef.key} could not be read`,
      });
    text = opts.inputText;
  }
  if (messages) {
    const all: Message[] = [...messages, ...feedback.map((content) => ({ role: 'user' as const, content }))];
    return ok({ kind: 'messages', messages: all });
  }
  if (text === undefined)
    return err({ code: 'InputUnavailable', path: 'spec.input', message: 'input has no prompt' });
  if (provider === 'sglang')
    return ok({ kind: 'text', rendering: RENDERING, text: [text, ...feedback].join('\n\n') });
  return ok({
    kind: 'messages',
    messages: [text, ...feedback].map((content) => ({ role: 'user' as const, content })),
  });
}
