"""`make-model [DIR]`: the tiny Llama the real SGLang server runs on CPU.

Two layers, hidden 64, four heads, random weights from a fixed seed, and a
byte-level BPE tokenizer trained here on a fixed corpus, so two machines build
the same files and nothing is downloaded. The text it writes is noise; what
matters is that the real server loads it, tokenizes, applies a chat template,
caches prefixes and answers with SGLang's own shapes.

Without DIR the model goes to the kit's cache
($CACHEROUTE_CACHE/sglang-<version>/tiny-llama) and is built once: a stamp
holds the recipe's hash, and a build goes to a temporary directory renamed
into place, so a crash never leaves half a model behind. Prints the directory.
"""

import hashlib
import json
import os
import shutil
import sys
import tempfile

# Bump when the recipe changes: a new recipe rebuilds the cached model.
RECIPE = 1
SEED = 0

SPECIAL_TOKENS = ["<|begin_of_text|>", "<|end_of_text|>", "<|system|>", "<|user|>", "<|assistant|>"]
BOS, EOS = SPECIAL_TOKENS[0], SPECIAL_TOKENS[1]
# One role marker a message, then its content; the assistant marker opens the answer.
CHAT_TEMPLATE = (
    "{% for m in messages %}{{ '<|' + m['role'] + '|>' + m['content'] }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}"
)
# A small fixed corpus: enough merges that common English words are one or two
# tokens; anything else falls back to single bytes (the alphabet is all 256).
WORDS = (
    "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma "
    "tau upsilon phi chi psi omega"
).split()
CORPUS = [("the quick brown fox jumps over the lazy dog " * 3 + w) for w in WORDS] + [
    "you are a helpful assistant. answer in one short sentence.",
    "what is the capital of france? the capital of france is paris.",
    "tell me a story about a cache, a router and a model server.",
]
VOCAB_SIZE = 512
CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "num_hidden_layers": 2,
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-5,
    "torch_dtype": "float32",
    "tie_word_embeddings": False,
}


def recipe_hash():
    # Everything that decides the files, so a changed recipe never reuses an old build.
    blob = json.dumps([RECIPE, SEED, SPECIAL_TOKENS, CHAT_TEMPLATE, CORPUS, VOCAB_SIZE, CONFIG], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def cache_dir():
    # The same cache root install.sh uses, next to the venv of the pinned version.
    from .__main__ import pinned_version

    root = os.environ.get("CACHEROUTE_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "cacheroute"
    )
    return os.path.join(root, f"sglang-{pinned_version()}", "tiny-llama")


def build(out):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS, trainer)
    tok.save(os.path.join(out, "tokenizer.json"))
    tokenizer_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": BOS,
        "eos_token": EOS,
        "chat_template": CHAT_TEMPLATE,
        "model_max_length": CONFIG["max_position_embeddings"],
    }
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump(tokenizer_config, f, indent=2, sort_keys=True)

    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    # vocab_size must be the tokenizer's own size: a larger embedding samples
    # ids the tokenizer cannot decode and the text comes out empty or garbled.
    config = dict(
        CONFIG,
        vocab_size=tok.get_vocab_size(),
        bos_token_id=tok.token_to_id(BOS),
        eos_token_id=tok.token_to_id(EOS),
    )
    torch.manual_seed(SEED)
    model = LlamaForCausalLM(LlamaConfig(**config))
    model.save_pretrained(out, safe_serialization=True)


def ensure(out):
    stamp = os.path.join(out, ".cacheroute-recipe")
    want = recipe_hash()
    if os.path.isfile(stamp) and open(stamp).read().strip() == want:
        return out
    parent = os.path.dirname(os.path.abspath(out))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".tiny-llama-", dir=parent)
    try:
        build(tmp)
        with open(os.path.join(tmp, ".cacheroute-recipe"), "w") as f:
            f.write(want + "\n")
        # Replace a stale build whole; a concurrent builder that won the race
        # wrote the same files, so losing the rename is fine.
        if os.path.isdir(out):
            shutil.rmtree(out)
        try:
            os.rename(tmp, out)
        except OSError:
            if not (os.path.isfile(stamp) and open(stamp).read().strip() == want):
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def main(args):
    if len(args) > 1:
        print("usage: make-model [DIR]", file=sys.stderr)
        return 2
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    print(ensure(args[0] if args else cache_dir()))
    return 0
