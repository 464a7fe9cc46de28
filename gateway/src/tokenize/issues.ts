// What can go wrong loading a tokenizer or encoding a chat, as data: the core
// returns these and the gateway's shell decides (log and fall back to
// approximate tokens, or refuse a model). Each names the file or field to fix.

export type LoadIssue =
  | { readonly code: 'missing-file'; readonly file: string; readonly message: string }
  | { readonly code: 'unreadable-file'; readonly file: string; readonly message: string }
  | { readonly code: 'invalid-json'; readonly file: string; readonly message: string }
  | {
      readonly code: 'invalid-field';
      readonly file: string;
      readonly field: string;
      readonly message: string;
    }
  | { readonly code: 'invalid-tokenizer'; readonly file: string; readonly message: string }
  | { readonly code: 'invalid-template'; readonly file: string; readonly message: string };

export type ChatIssue =
  /** The model has no chat template: SGLang answers such a chat request with 400. */
  | { readonly code: 'no-chat-template'; readonly message: string }
  /** A content part SGLang does not turn into text (images, audio, video, ...). */
  | { readonly code: 'unsupported-content'; readonly path: string; readonly message: string }
  /** The template raised (its `raise_exception`) or failed to render. */
  | { readonly code: 'template-error'; readonly message: string };

export type Result<T, E> =
  { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: E };
