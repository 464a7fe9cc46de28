"""cacheroute's SGLang conformance kit: SGLang's own code answers for SGLang.

  check-args [--model FAMILY] ARGV... | --batch
  dump-flags
  validate MODEL [JSON] | --batch
  decode-events      (a KV-event or load stream, or frames on stdin, decoded by SGLang's classes)
  tree-events        (the KV events SGLang's own radix cache records for a list of operations)
  auth               (SGLang's API-key decisions for cases on stdin, and its admin-optional routes)
  make-model DIR     (the tiny Llama the real CPU server runs)
  serve ARGV...      (the real server on CPU; see serve.py for what CPU adapts)
  session            (one process running tree-events, validate, auth, decode-events --drain/--stdin
                      per JSON line on stdin: SGLang imported once; see session.py)

Run through hack/sglang/kit.sh, which installs the pinned SGLang first.
"""

import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def pinned_version():
    with open(os.path.join(ROOT, "lib", "sglang", "version.json")) as f:
        return json.load(f)["sglang"]


def quiet_logs():
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    command, args = argv[0], argv[1:]
    if command == "check-args":
        quiet_logs()
        from . import gpu_stand_in

        gpu_stand_in.install()
        from sglang.srt.plugins import load_plugins

        load_plugins()
        from . import check_args

        return check_args.main(args)
    if command == "dump-flags":
        quiet_logs()
        from . import dump_flags

        return dump_flags.main(pinned_version())
    if command == "validate":
        quiet_logs()
        from . import validate

        return validate.main(args)
    if command == "decode-events":
        from . import events

        return events.main(args)
    if command == "tree-events":
        quiet_logs()
        from . import tree_events

        return tree_events.main(args)
    if command == "auth":
        quiet_logs()
        from . import auth

        return auth.main(args)
    if command == "make-model":
        from . import make_model

        return make_model.main(args)
    if command == "serve":
        from . import serve

        return serve.main(args)
    if command == "session":
        from . import session

        return session.main(args, main)
    print(f"unknown command {command!r}\n{__doc__}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
