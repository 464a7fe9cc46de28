"""`serve ARGV...`: the real `sglang.launch_server` on this CPU-only machine,
from a pod's rendered arguments.

Everything the pod declared passes through to SGLang unchanged, except what a
CPU forces; that is listed once, in CPU_ADAPTATIONS below (and in
hack/sglang/README.md). The server runs in this process (no second Python
start-up, no second SGLang import): SIGTERM to this pid ends SGLang's tree.

Identity. The operator checks /server_info and /model_info against what it
declared. The tiny model (make_model.py) stands in for the declared weights,
but SGLang still loads it *from the declared path*: when `--model-path` (or
`--tokenizer-path`) names an absolute path that does not exist, serve creates
it as a symlink to the tiny model, so `model_path`, `tokenizer_path` and the
default served name are what the pod declared. It never replaces anything that
exists, except its own stale symlink into a tiny-llama directory. A relative
path (a Hugging Face id) or an occupied path cannot be linked without writing
where it should not: SGLang then gets the tiny model's own path, and says so.
What still differs from the pod: tp_size and dp_size are 1.
"""

import argparse
import os
import runpy
import sys

from . import make_model

HERE = os.path.dirname(os.path.abspath(__file__))
CPU_SHIM = os.path.join(os.path.dirname(HERE), "cpu_shim")

# The one list of what CPU forces, by ServerArgs dest (the flag's aliases are
# found from SGLang's own parser, so `--tensor-parallel-size` counts as
# `--tp-size`). value: replaces the pod's value, or is added. None: removed.
# True: a store_true flag that is always on.
CPU_ADAPTATIONS = {
    # The CPU engine; there is no GPU.
    "device": "cpu",
    # The default x86 CPU backend needs Intel AMX; torch_native runs anywhere.
    "attention_backend": "torch_native",
    # Per-phase backends name GPU kernels; on CPU the one above serves both.
    "prefill_attention_backend": None,
    "decode_attention_backend": None,
    # One process: tensor/data parallelism needs as many devices.
    "tp_size": "1",
    "dp_size": "1",
    # Without it the idle scheduler busy-polls a whole core (2% with it).
    "sleep_on_idle": True,
}
# HiCache: the host<->device copy that exists in torch (cpu_shim/sitecustomize.py).
HICACHE_ADAPTATIONS = {
    "hicache_io_backend": "direct",
    "hicache_mem_layout": "layer_first",
}
# The KV pool: on CPU the default memory fraction is taken of the machine's
# RAM. A pod's own value is kept up to the cap (512 bytes a token for the tiny
# model: 256k tokens is 128 MB); none, or a larger one, becomes the default.
DEFAULT_MAX_TOTAL_TOKENS = 8192
MAX_TOTAL_TOKENS_CAP = 262144
# What the tiny Llama cannot be asked to do on CPU: refused with a reason.
UNSUPPORTED = {
    "enable_hisparse": "HiSparse needs a sparse-attention model (DeepSeek V3.2/V4, MiniMax M3) on a GPU",
}
UNSUPPORTED_VALUES = {
    ("disaggregation_transfer_backend", "nixl"): "NIXL is not installed here; PD on CPU runs Mooncake over TCP",
    ("disaggregation_transfer_backend", "mori"): "MoRI needs AMD GPUs; PD on CPU runs Mooncake over TCP",
    ("disaggregation_transfer_backend", "ascend"): "Ascend needs NPUs; PD on CPU runs Mooncake over TCP",
}
# Prefill/decode: Mooncake's transfer engine (the kit installs its non-CUDA
# build) moves the KV over TCP, as SGLang's own `mooncake_tcp` backend asks
# (MC_FORCE_TCP=1, no RDMA device). The decode server keeps a host pool for
# retracted requests (--disaggregation-decode-retraction-backup host_pool, its
# default): the host copy HiCache uses, so the same shim and flags.
PD_ADAPTATIONS = {
    "disaggregation_transfer_backend": "mooncake_tcp",
    "disaggregation_ib_device": None,
}
ENV = {
    # SGLang's CPU engine (CPU kernels from the stand-in sgl_kernel).
    "SGLANG_USE_CPU_ENGINE": "1",
    # Nothing is downloaded: the model is local.
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
}
# A prefill server sends a request's cached prefix before its forward runs,
# behind a CUDA event on the forward stream (disaggregation/prefill.py
# maybe_send_cached_prefix_chunk); on CPU the whole KV goes in the last send.
PD_ENV = {
    "SGLANG_DISAGG_PREFILL_EARLY_SEND_CACHED_PREFIX": "false",
}


def log(msg):
    print(f"[kit serve] {msg}", file=sys.stderr, flush=True)


def build_parser():
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser(prog="sglang.launch_server")
    ServerArgs.add_cli_args(parser)
    return parser


def actions_by_dest(parser):
    return {a.dest: a for a in parser._actions if a.option_strings}


def strip_flags(argv, actions):
    """argv without every occurrence (any alias, `--flag=v` or `--flag v...`) of these actions."""
    names = {name: a for a in actions for name in a.option_strings}
    out = []
    i = 0
    while i < len(argv):
        token = argv[i]
        name = token.split("=", 1)[0]
        action = names.get(name)
        if action is None:
            out.append(token)
            i += 1
            continue
        i += 1
        if "=" in token or action.nargs == 0:
            continue
        # Values follow until the next option (argparse's own rule for nargs None/?/+/*).
        taken = 0
        limit = 1 if action.nargs in (None, "?") else (action.nargs if isinstance(action.nargs, int) else None)
        while i < len(argv) and (limit is None or taken < limit) and not argv[i].startswith("-"):
            i += 1
            taken += 1
    return out


def flag_of(action):
    # The long primary name, as SGLang's docs spell it.
    return action.option_strings[0]


def is_own_link(path):
    return os.path.islink(path) and os.path.basename(os.path.realpath(path)).startswith("tiny-llama")


def link_declared(declared, model):
    """The path SGLang should load for a declared path: the declared one itself
    when it is (or can be made) a link to the tiny model, else the model's own."""
    real_model = os.path.realpath(model)
    if os.path.realpath(declared) == real_model:
        return declared
    if not os.path.isabs(declared):
        log(f"{declared!r} is not an absolute path: SGLang loads {model} and reports that path")
        return model
    if os.path.lexists(declared) and not is_own_link(declared):
        log(f"{declared} exists and is not the kit's: SGLang loads {model} and reports that path")
        return model
    os.makedirs(os.path.dirname(declared) or "/", exist_ok=True)
    tmp = f"{declared}.kit-{os.getpid()}"
    os.symlink(real_model, tmp)
    os.replace(tmp, declared)  # atomic: a concurrent serve sees the old link or the new one
    log(f"{declared} -> {real_model}")
    return declared


def refuse(ns):
    for dest, why in UNSUPPORTED.items():
        if getattr(ns, dest, None):
            return f"--{dest.replace('_', '-')}: {why}"
    for (dest, value), why in UNSUPPORTED_VALUES.items():
        if getattr(ns, dest, None) == value:
            return f"--{dest.replace('_', '-')} {value}: {why}"
    return None


def is_disaggregated(ns):
    return ns.disaggregation_mode in ("prefill", "decode")


def needs_host_pool(ns):
    """HiCache's host tier, or a decode server's retraction backup (SGLang's hicache_hook)."""
    return ns.enable_hierarchical_cache or (
        ns.disaggregation_mode == "decode" and ns.disaggregation_decode_retraction_backup in (None, "host_pool")
    )


def adapt(argv, parser, model):
    """The argv SGLang gets: the pod's, with CPU_ADAPTATIONS applied and the model linked."""
    ns = parser.parse_args(argv)  # exits 2 with argparse's message, as SGLang would
    why = refuse(ns)
    if why:
        raise SystemExit(f"kit serve: cannot run on CPU: {why}")
    actions = actions_by_dest(parser)
    forced = dict(CPU_ADAPTATIONS)
    if is_disaggregated(ns):
        forced.update(PD_ADAPTATIONS)
    if needs_host_pool(ns):
        forced.update(HICACHE_ADAPTATIONS)
    mtt = ns.max_total_tokens
    forced["max_total_tokens"] = str(mtt if mtt is not None and mtt <= MAX_TOTAL_TOKENS_CAP else DEFAULT_MAX_TOTAL_TOKENS)
    forced["model_path"] = link_declared(ns.model_path, model)
    if ns.tokenizer_path is not None:
        forced["tokenizer_path"] = link_declared(ns.tokenizer_path, model)

    out = strip_flags(argv, [actions[d] for d in forced])
    for dest, value in forced.items():
        if value is None:
            continue
        flag = flag_of(actions[dest])
        out += [flag] if value is True else [flag, value]
    return out


def main(args):
    if not args or args[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if args else 2
    os.environ.update(ENV)
    model = make_model.ensure(make_model.cache_dir())
    parser = build_parser()
    argv = adapt(args, parser, model)
    ns = parser.parse_args(argv)
    if is_disaggregated(ns):
        os.environ.update(PD_ENV)
    if is_disaggregated(ns) or getattr(ns, "hicache_storage_backend", None) == "mooncake":
        # The transfer engine (PD's, and the one HiCache's mooncake store client reuses,
        # mooncake_transfer_engine.py maybe_init_shared_mooncake_transfer_engine) registers
        # under this machine's address, which SGLang finds on a network interface
        # (utils/network.py get_local_ip_auto). A test's pod IP is an address on loopback
        # (no interface of its own): the server's --host is that address. An address
        # already given (SGLANG_HOST_IP) is kept.
        if ns.host not in ("0.0.0.0", "::", "localhost") and not os.environ.get("SGLANG_HOST_IP"):
            os.environ["SGLANG_HOST_IP"] = ns.host
    if needs_host_pool(ns) or is_disaggregated(ns):
        # Spawned children inherit the environment: the shim loads in each.
        os.environ["PYTHONPATH"] = CPU_SHIM + os.pathsep + os.environ.get("PYTHONPATH", "")
        runpy.run_path(os.path.join(CPU_SHIM, "sitecustomize.py"))  # this process too
    log("sglang.launch_server " + " ".join(argv))
    sys.argv = ["sglang.launch_server", *argv]
    runpy.run_module("sglang.launch_server", run_name="__main__", alter_sys=True)
    return 0
