"""Every flag of `python -m sglang.launch_server`, read off SGLang's own argparse parser."""

import argparse
import enum
import json
import math


def _kind(action):
    if isinstance(action, argparse._StoreTrueAction):
        return "store_true"
    if isinstance(action, argparse._StoreFalseAction):
        return "store_false"
    if isinstance(action, argparse._StoreConstAction):
        return "store_const"
    if isinstance(action, argparse.BooleanOptionalAction):
        return "boolean_optional"
    if isinstance(action, argparse._AppendAction):
        return "append"
    if type(action) is argparse._StoreAction:
        return "store"
    # SGLang's own actions (deprecated flags, LoRA paths): what they take is in nargs.
    return "custom:" + type(action).__name__


def _type_name(action):
    t = action.type
    if t is None:
        return None if action.nargs == 0 else "str"
    for builtin in (int, float, str, bool):
        if t is builtin:
            return builtin.__name__
    if t is json.loads:
        return "json"
    return getattr(t, "__name__", type(t).__name__)


def _plain(value):
    """A JSON-safe rendering of a default or choice, the way a command line would spell it."""
    if isinstance(value, enum.Enum):
        return _plain(value.value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (set, frozenset)):
        return sorted((_plain(v) for v in value), key=str)  # a set has no order to keep
    if isinstance(value, (list, tuple, range)) or hasattr(value, "__iter__") and not isinstance(value, dict):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return repr(value)


def build_parser():
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    return parser


def describe(parser):
    flags = []
    for action in parser._actions:
        longs = [o for o in action.option_strings if o.startswith("--")]
        if not longs or isinstance(action, argparse._HelpAction):
            continue
        entry = {
            "name": longs[0],
            "aliases": [o for o in action.option_strings if o != longs[0]],
            "dest": action.dest,
            "kind": _kind(action),
            "type": _type_name(action),
            "nargs": _plain(action.nargs),
            "choices": None if action.choices is None else _plain(action.choices),
            "default": _plain(action.default),
        }
        flags.append(entry)
    flags.sort(key=lambda f: f["name"])
    return flags


def main(version):
    flags = describe(build_parser())
    print(json.dumps({"sglang": version, "flags": flags}, indent=1, sort_keys=False))
    return 0
