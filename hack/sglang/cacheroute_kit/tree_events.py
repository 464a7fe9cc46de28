"""tree-events: the KV events SGLang's own radix cache records for a list of operations.

  tree-events --page-size N [--kv-size TOKENS] < ops.jsonl

Builds the radix cache a Llama server on the pinned SGLang builds by default
(UnifiedRadixCache over its default tree core, KV events on), on CPU with a
tiny KV pool, and applies one operation per input line:

  {"op": "match",  "tokens": [...], "cache_salt"?: str, "extra_key"?: str}
  {"op": "insert", "tokens": [...], "cache_salt"?: str, "extra_key"?: str}
  {"op": "evict",  "tokens": N}
  {"op": "reset"}
  {"op": "take"}    -> prints {"events": [...]}: the events recorded since the last take

Inserts are cut to whole pages, as the scheduler's checkpoints are. Events
are msgspec.to_builtins of SGLang's structs, as decode-events prints them.
The cache's own construction records AllBlocksCleared, so the first take
starts with it.
"""

import argparse
import json
import sys
from array import array


def build_cache(page_size, kv_size):
    import torch

    from sglang.srt.mem_cache.allocator import TokenToKVPoolAllocator
    from sglang.srt.mem_cache.cache_init_params import CacheInitParams
    from sglang.srt.mem_cache.events import KvEventLoraNames
    from sglang.srt.mem_cache.memory_pool import MHATokenToKVPool, ReqToTokenPool
    from sglang.srt.mem_cache.unified_cache.component_type import ComponentType
    from sglang.srt.mem_cache.unified_radix_cache import UnifiedRadixCache
    from sglang.srt.server_args import ServerArgs, set_global_server_args_for_scheduler

    set_global_server_args_for_scheduler(
        ServerArgs(model_path="dummy", page_size=page_size, device="cpu")
    )
    kv = MHATokenToKVPool(
        size=kv_size,
        page_size=page_size,
        dtype=torch.bfloat16,
        head_num=1,
        head_dim=8,
        layer_num=1,
        device="cpu",
        enable_memory_saver=False,
    )
    allocator = TokenToKVPoolAllocator(
        size=kv_size, dtype=torch.bfloat16, device="cpu", kvcache=kv, need_sort=False
    )
    params = CacheInitParams(
        req_to_token_pool=ReqToTokenPool(
            size=4, max_context_len=kv_size, device="cpu", enable_memory_saver=False
        ),
        token_to_kv_pool_allocator=allocator,
        page_size=page_size,
        disable=False,
        tree_components=(ComponentType.FULL,),
        enable_kv_cache_events=True,
        kv_event_lora_names=KvEventLoraNames(),
        eviction_policy="lru",
    )
    return UnifiedRadixCache(params=params), allocator


def main(argv):
    p = argparse.ArgumentParser(prog="tree-events")
    p.add_argument("--page-size", type=int, required=True)
    p.add_argument("--kv-size", type=int, default=65536)
    args = p.parse_args(argv)

    import msgspec

    from sglang.srt.mem_cache.base_prefix_cache import (
        EvictParams,
        InsertParams,
        MatchPrefixParams,
    )
    from sglang.srt.mem_cache.radix_cache import RadixKey

    cache, allocator = build_cache(args.page_size, args.kv_size)

    def key_of(op, cut):
        tokens = op["tokens"]
        if cut:
            tokens = tokens[: len(tokens) - len(tokens) % args.page_size]
        return RadixKey(
            array("q", tokens),
            extra_key=op.get("extra_key"),
            cache_salt=op.get("cache_salt"),
        )

    for raw in sys.stdin:
        if not raw.strip():
            continue
        op = json.loads(raw)
        kind = op["op"]
        if kind == "match":
            cache.match_prefix(MatchPrefixParams(key=key_of(op, cut=False)))
        elif kind == "insert":
            key = key_of(op, cut=True)
            if len(key) == 0:
                continue
            value = allocator.alloc(len(key))
            if value is None:
                raise RuntimeError("the kit's KV pool is full: raise --kv-size")
            cache.insert(InsertParams(key=key, value=value[: len(key)]))
        elif kind == "evict":
            cache.evict(EvictParams(num_tokens=op["tokens"]))
        elif kind == "reset":
            cache.reset()
        elif kind == "take":
            events = [msgspec.to_builtins(e) for e in cache.take_events()]
            print(json.dumps({"events": events}), flush=True)
        else:
            raise ValueError(f"unknown op {kind!r}")
    return 0
