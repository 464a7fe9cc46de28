"""SGLang's own verdict on a launch command line: its argparse parser, then the
startup checks `sglang.launch_server` runs before it touches a GPU
(`ServerArgs.resolve_once()` and `check_server_args()`, as Engine does).

Single: `check-args [--model FAMILY] ARGV...` prints SGLang's message and exits
as SGLang would (2 for an argparse error, 1 for a refused combination, 0 when
it starts). Batch: `check-args --batch` reads JSON lines
`{"id", "argv", "model"?, "env"?}` and writes one JSON line per request
`{"id", "ok", "stage", "error"}`; SGLang is imported once and every check runs
in a forked child, so one check's process-wide writes (environment variables,
caches) never reach the next.

`--model-path` names a directory on the GPU node; the check replaces it with a
local directory holding only the `config.json` of the declared model family
(models/<family>/), because resolution reads the model's architecture.
"""

import io
import json
import os
import sys
import traceback
from contextlib import redirect_stderr, redirect_stdout

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(os.path.dirname(HERE), "models")
DEFAULT_FAMILY = "llama"
MODEL_FLAGS = ("--model-path", "--model")


def model_dir(family):
    path = os.path.join(MODELS, family or DEFAULT_FAMILY)
    if not os.path.isfile(os.path.join(path, "config.json")):
        known = sorted(os.listdir(MODELS))
        raise ValueError(f"no model config for family {family!r}; the kit has {known}")
    return path


def substitute_model(argv, family):
    """The same command line with the model path pointing at the family's config."""
    local = model_dir(family)
    out = []
    skip = False
    for i, token in enumerate(argv):
        if skip:
            skip = False
            continue
        name = token.split("=", 1)[0]
        if name in MODEL_FLAGS:
            if "=" in token:
                out.append(f"{name}={local}")
            else:
                out.extend([name, local])
                skip = i + 1 < len(argv)
            continue
        out.append(token)
    return out


def _argparse_message(captured):
    lines = [line for line in captured.splitlines() if line.strip()]
    for line in reversed(lines):
        marker = ": error: "
        if marker in line:
            return line.split(marker, 1)[1]
    return lines[-1] if lines else "argparse exited"


def check(argv):
    """Returns (stage, error): stage is parse, resolve or check; error None when SGLang starts."""
    from sglang.srt.server_args import prepare_server_args

    captured = io.StringIO()
    try:
        with redirect_stderr(captured), redirect_stdout(captured):
            server_args = prepare_server_args(list(argv))
    except SystemExit as exit_:
        if exit_.code in (0, None):
            return "parse", None
        return "parse", _argparse_message(captured.getvalue())
    stage = "resolve"
    try:
        server_args.resolve_once()
        stage = "check"
        server_args.check_server_args()
    except Exception as err:  # noqa: BLE001 - SGLang refuses with several types (ValueError, AssertionError, ...)
        message = str(err).strip() or traceback.format_exception_only(type(err), err)[-1].strip()
        return stage, f"{type(err).__name__}: {message}"
    return "check", None


def _child(request, write_fd):
    for key, value in (request.get("env") or {}).items():
        os.environ[key] = value
    try:
        stage, error = check(substitute_model(request["argv"], request.get("model")))
        result = {"ok": error is None, "stage": stage, "error": error}
    except Exception as err:  # noqa: BLE001 - a kit fault is reported, not a verdict
        result = {"ok": False, "stage": "kit", "error": f"{type(err).__name__}: {err}"}
    with os.fdopen(write_fd, "w") as out:
        json.dump(result, out)
    os._exit(0)


def check_forked(request):
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        _child(request, write_fd)
    os.close(write_fd)
    with os.fdopen(read_fd) as pipe:
        payload = pipe.read()
    _, status = os.waitpid(pid, 0)
    if not payload:
        return {"ok": False, "stage": "kit", "error": f"checker died (wait status {status})"}
    return json.loads(payload)


def warm_up():
    """Import everything a check imports, once, in the parent, so each fork starts warm."""
    check_forked({"argv": ["--model-path", model_dir(DEFAULT_FAMILY)]})
    import sglang.srt.arg_groups.pipeline  # noqa: F401


def batch(stdin, stdout):
    warm_up()
    for line in stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        result = check_forked(request)
        stdout.write(json.dumps({"id": request.get("id"), **result}) + "\n")
        stdout.flush()
    return 0


def main(args):
    if args and args[0] == "--batch":
        return batch(sys.stdin, sys.stdout)
    family = None
    if len(args) >= 2 and args[0] == "--model":
        family, args = args[1], args[2:]
    stage, error = check(substitute_model(args, family))
    if error is None:
        print("ok")
        return 0
    print(error)
    return 2 if stage == "parse" else 1
