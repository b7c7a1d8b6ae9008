#!/usr/bin/env bash
# scripts/peer-bench.sh [OPTIONS] — StarZeRO against PyTorch on CPU (a benchmark, not a test): the same
# GPT-2 (llm.c checkpoint written by sz-train), batch, seq, AdamW and thread count in sz-bench and in
# a plain PyTorch GPT-2 (eager and torch.compile, fp32 and bf16 autocast; DDP and FSDP FULL_SHARD on
# 2 ranks over gloo against sz-bench at ZeRO stages 0 and 3). It first checks that PyTorch's first
# fp32 losses equal sz-train's on the same checkpoint and batches (1e-4) and stops if not. Writes
# BUILD/peer-bench/peer-bench.json and the peer-bench section of docs/BENCHMARKS.md.
#   scripts/peer-bench.sh                       # d12, batch 4, seq 64, 2 warm-up + 5 timed steps
#   scripts/peer-bench.sh --check-only          # just the loss check
#   scripts/peer-bench.sh --steps 3 --rounds 2 --systems sz-fp32,torch-eager-fp32 --no-doc
# Options are scripts/peer_bench.py's (--help). PyTorch lives in a virtual environment of its own,
# SZ_PEER_VENV (default ~/.cache/starzero/peer-venv), made on the first run with `pip install torch
# numpy` from PyPI (the PyPI wheel pulls CUDA libraries: about 5.4 GB; it runs on CPU). Nothing of
# the build or the tests needs Python or this environment.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
venv=${SZ_PEER_VENV:-$HOME/.cache/starzero/peer-venv}
if ! "$venv/bin/python" -c 'import torch, numpy' 2>/dev/null; then
    mkdir -p "$(dirname "$venv")"
    free_kb=$(df -Pk "$(dirname "$venv")" | awk 'NR == 2 { print $4 }')
    [ "$free_kb" -ge $((7 * 1024 * 1024)) ] ||
        sz_die "$(dirname "$venv"): $((free_kb / 1024)) MB free; PyTorch's environment needs about 6 GB (set SZ_PEER_VENV elsewhere)"
    command -v python3 >/dev/null || sz_die "python3 is needed for the PyTorch side (apt-get install python3-venv)"
    sz_log "making $venv with PyTorch (CPU use of the PyPI wheel, ~5.4 GB; minutes)"
    python3 -m venv "$venv" || sz_die "python3 -m venv failed (apt-get install python3-venv)"
    "$venv/bin/pip" install --quiet torch numpy || sz_die "pip install torch numpy into $venv failed"
fi
if [ "${SZ_PEER_NO_BUILD:-0}" != 1 ]; then
    "$SZ_ROOT/scripts/build.sh" >/dev/null
fi
sz_load_env
[ -x "$SZ_BUILD_DIR/sz-bench" ] && [ -x "$SZ_BUILD_DIR/sz-train" ] || sz_die "no sz-bench/sz-train in $SZ_BUILD_DIR"
cmdline="scripts/peer-bench.sh${*:+ $*}"
exec "$venv/bin/python" "$SZ_ROOT/scripts/peer_bench.py" --build-dir "$SZ_BUILD_DIR" --command-line "$cmdline" "$@"
