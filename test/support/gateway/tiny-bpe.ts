import { byteLevelAlphabet } from 'tokenizers';

// A byte-level BPE small enough to write out: five special tokens, the 256
// byte symbols, and the merges of "hello". Exactness against SGLang itself is
// test/conformance/tokenizer.test.ts's job; this checks the loader's logic.
export const SPECIALS = ['<|begin_of_text|>', '<|end_of_text|>', '<|system|>', '<|user|>', '<|assistant|>'];
const MERGES: [string, string][] = [
  ['h', 'e'],
  ['l', 'l'],
  ['he', 'll'],
  ['hell', 'o'],
];
export const VOCAB = [...SPECIALS, ...byteLevelAlphabet(), ...MERGES.map(([a, b]) => a + b)];
export const id = (t: string): number => VOCAB.indexOf(t);

export const TOKENIZER_JSON = {
  version: '1.0',
  truncation: null,
  padding: null,
  added_tokens: SPECIALS.map((content, i) => ({
    id: i,
    content,
    single_word: false,
    lstrip: false,
    rstrip: false,
    normalized: false,
    special: true,
  })),
  normalizer: null,
  pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
  post_processor: null,
  decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
  model: {
    type: 'BPE',
    dropout: null,
    unk_token: null,
    vocab: Object.fromEntries(VOCAB.map((t, i) => [t, i])),
    merges: MERGES,
  },
};
export const TEMPLATE =
  "{% for m in messages %}{{ '<|' + m['role'] + '|>' + m['content'] }}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}";
export const CONFIG = {
  tokenizer_class: 'PreTrainedTokenizerFast',
  bos_token: SPECIALS[0],
  eos_token: SPECIALS[1],
  chat_template: TEMPLATE,
};
