// A request's prompt as the tokenizer takes it, and its ids: a chat's
// messages through the template, a text as it is. Undefined when the model's
// template refuses the messages (the runtime will answer 400) or holds
// content the runtime does not turn into text: routing then uses
// approximate tokens, and the request still goes upstream unchanged.

import { readChatMessages } from './message-shapes.ts';
import { ChatMessage } from './messages.ts';
import type { Tokenizer } from './tokenizer.ts';

// Built once: a zod schema costs more to build than to run (it was a third of a request's tokenizing).
const ChatMessages = ChatMessage.array();

export type TokenizerInput =
  | {
      readonly kind: 'chat';
      readonly messages: readonly unknown[];
      readonly templateKwargs: Readonly<Record<string, unknown>>;
    }
  | { readonly kind: 'text'; readonly text: string };

export async function encodeRequest(tok: Tokenizer, input: TokenizerInput): Promise<number[] | undefined> {
  try {
    if (input.kind === 'text') return await tok.encodeText(input.text);
    // Read by hand where the schema would take them as they are (message-shapes.ts).
    const read = readChatMessages(input.messages);
    const messages = read ? { success: true as const, data: read } : ChatMessages.safeParse(input.messages);
    if (!messages.success) return undefined;
    const ids = await tok.encodeChat(messages.data, { templateKwargs: input.templateKwargs });
    return ids.ok ? ids.value : undefined;
  } catch {
    // A prompt the tokenizer cannot take is still the runtime's to answer; routing guesses.
    return undefined;
  }
}
