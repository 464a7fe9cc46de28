#!/usr/bin/env bash
# Runs a command of the SGLang conformance kit (cacheroute_kit/__main__.py) in
# the pinned SGLang's virtualenv, installing it first when missing:
#   bash hack/sglang/kit.sh check-args --model llama --model-path /models --tp-size 8
#   bash hack/sglang/kit.sh dump-flags
# SGLANG_KIT_VENV=<dir> uses an existing venv instead (no install).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
VENV="${SGLANG_KIT_VENV:-$(bash "$HERE/install.sh" | tail -n 1)}"
# The stand-in sgl_kernel comes first: the published one is a CUDA build (README.md).
export PYTHONPATH="$HERE/stubs:$HERE${PYTHONPATH:+:$PYTHONPATH}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONDONTWRITEBYTECODE=1
exec "$VENV/bin/python" -m cacheroute_kit "$@"
