"""session: one long-lived kit process that runs kit commands on request.

  session < requests.jsonl

Each input line is one command, run in this process by the same entry point
as `kit.sh COMMAND ARGS...` (`__main__.main`), with `stdin` as its standard
input:

  {"id": ANY, "argv": ["tree-events", "--page-size", "16"], "stdin": "..."}

and each answer one line, in request order:

  {"id": ANY, "exit": 0, "stdout": "...", "stderr": "..."}

`exit` is what the command's own process would have exited with (its return
value, an argparse SystemExit, or 1 with the traceback on `stderr` for an
exception). SGLang is imported once, by the first command that needs it, and
every later command reuses it: a test that asks SGLang's tree a dozen times
pays Python's start and SGLang's imports once instead of a dozen times.

Only commands that hold no process-wide state between runs are served:
tree-events (a new cache per run), validate, auth, and decode-events with
--drain or --stdin (a finite answer). check-args patches torch's device
queries and forks, serve and make-model start processes, and a live
decode-events subscription would hold the session: those get exit 2 and say
to run the command on its own.

The process's standard output is moved to its standard error before anything
runs, so whatever SGLang or a native library writes there cannot break the
answers; the answers go to a duplicate of the original descriptor.
"""

import contextlib
import io
import json
import os
import sys
import traceback

SERVED = ("tree-events", "validate", "auth", "decode-events")


def refusal(argv):
    """Why `argv` is not run in the session, or None."""
    if not argv or argv[0] not in SERVED:
        name = argv[0] if argv else "(none)"
        return f"session: {name!r} is not served in-process ({', '.join(SERVED)} are); run it on its own"
    if argv[0] == "decode-events" and "--drain" not in argv and "--stdin" not in argv:
        return "session: decode-events needs --drain or --stdin here (a live subscription would hold the session)"
    return None


def run(argv, stdin, entry):
    """(exit, stdout, stderr) of one command, run as its own process would run it."""
    why = refusal(argv)
    if why is not None:
        return 2, "", why + "\n"
    out, err = io.StringIO(), io.StringIO()
    saved_stdin = sys.stdin
    sys.stdin = io.StringIO(stdin)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = entry(argv)
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
                if not isinstance(e.code, (int, type(None))):
                    print(e.code, file=sys.stderr)
            except Exception:
                traceback.print_exc()
                code = 1
    finally:
        sys.stdin = saved_stdin
    return (0 if code is None else code), out.getvalue(), err.getvalue()


def main(args, entry):
    if args:
        print("usage: session < requests.jsonl", file=sys.stderr)
        return 2
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    for raw in sys.stdin:
        if not raw.strip():
            continue
        request = json.loads(raw)
        code, out, err = run(list(request.get("argv", [])), request.get("stdin", ""), entry)
        answers.write(json.dumps({"id": request.get("id"), "exit": code, "stdout": out, "stderr": err}) + "\n")
        answers.flush()
    return 0
