"""SGLang's own API-key decisions, for the simulator to be held to.

Reads {"cases": [{method, path, authorization, api_key, admin_api_key, level}]}
on stdin and prints {"decisions": [{allowed, status}], "admin_optional": [paths]}:
each case decided by sglang/srt/utils/auth.py's decide_request_auth, and the
routes sglang/srt/entrypoints/http_server.py marks @auth_level(ADMIN_OPTIONAL),
read from its source (importing the server would load the whole runtime).
"""

import json
import os
import re
import sys

ROUTE = re.compile(r"@app\.(?:get|post|put|delete|api_route)\(\s*\"([^\"]+)\"")


def admin_optional_routes(source):
    paths = set()
    block = []
    for line in source.splitlines():
        stripped = line.strip()
        if stripped.startswith("@") or (block and not stripped.startswith(("def ", "async def "))):
            block.append(stripped)
            continue
        if block and stripped.startswith(("def ", "async def ")):
            text = " ".join(block)
            if "@auth_level(AuthLevel.ADMIN_OPTIONAL)" in text:
                paths.update(ROUTE.findall(text))
        block = []
    return sorted(paths)


def main(args):
    from sglang.srt.utils.auth import AuthLevel, decide_request_auth
    import sglang.srt.entrypoints as entrypoints

    request = json.load(sys.stdin)
    decisions = []
    for c in request["cases"]:
        d = decide_request_auth(
            method=c["method"],
            path=c["path"],
            authorization_header=c.get("authorization"),
            api_key=c.get("api_key"),
            admin_api_key=c.get("admin_api_key"),
            auth_level=AuthLevel(c["level"]),
        )
        decisions.append({"allowed": d.allowed, "status": d.error_status_code})
    # A namespace package: its directory, not a __file__.
    with open(os.path.join(list(entrypoints.__path__)[0], "http_server.py")) as f:
        admin = admin_optional_routes(f.read())
    print(json.dumps({"decisions": decisions, "admin_optional": admin}))
    return 0
