// The simulator's own tokenizer as the gateway's `Tokenizer`: in the bench
// the runtime IS the simulator, so a gateway holding this adapter holds the
// runtime's tokenizer and chat formatting, exactly the production setup
// (there, --tokenizers gives it the model's tokenizer.json and template).
// Text is encoded as the simulator's /generate and /v1/completions encode it;
// chat as its /v1/chat/completions applies its template (a role token before
// each message's content, then <|assistant|>).

import type { Tokenizer } from '../../gateway/src/tokenize/index.ts';
import { applyChatTemplate } from '../sim/generation.ts';
import { encode } from '../sim/tokenizer.ts';

export function buildSimTokenizer(): Tokenizer {
  return {
    encodeText: (text) => Promise.resolve(encode(text)),
    encodeChat: (messages) => Promise.resolve({ ok: true, value: applyChatTemplate(messages) }),
    // The simulator formats chats in code, not with a Jinja template.
    chatTemplate: undefined,
  };
}
