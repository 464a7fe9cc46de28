// The exact input a provider receives, built from the frozen spec.
//
// SGLang's native /generate takes text or token ids and applies no chat
// template, and /tokenize takes plain text. So for SGLang a Task is rendered to
// one plain text (RENDERING below), tokenized by the runtime, and those ids are
// what is sent. We do not guess a model's chat template: a model that needs its
// own template should be given a `prompt` already in that format.
//   prompt / configMapRef: the text, unchanged.
//   messages: each message as "<Role>: <content>" joined by a blank line, then
//             "\n\nAssistant:" as the cue to answer.
// OpenRouter's Chat Completions applies the model's template upstream, so it
// receives messages: a prompt becomes one user message.
//
// Rework appends every reviewer feedback so far, in order, as a user message
// ("Reviewer feedback on the previous answer:\n<feedback>"); for a plain prompt
// the same text follows after a blank line. The rejected answers themselves are
// not replayed: status keeps only their hashes, and the feedback says what to change.
import type { z } from 'zod';
import type { ChatMessage, TaskSpec } from '../../api/task.ts';
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

const ROLE_LABEL: Record<Message['role'], string> = {
  system: 'System',
  user: 'User',
  assistant: 'Assistant',
};

export function renderMessages(messages: readonly Message[]): string {
  return `${messages.map((m) => `${ROLE_LABEL[m.role]}: ${m.content}`).join('\n\n')}\n\nAssistant:`;
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
    return ok(
      provider === 'sglang'
        ? { kind: 'text', rendering: RENDERING, text: renderMessages(all) }
        : { kind: 'messages', messages: all },
    );
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
