#!/usr/bin/env bash
# GPU check of the shipped VLA on this machine: parity (fp16/bf16/graphs/ORT-CUDA/TensorRT vs torch
# fp32) and a batch-1 latency table (encoder + K = 1..10, p50/p99), written as JSON with machine
# facts to benchmarks/results/gpu_check.json (or --out). Under 5 minutes; a few MiB of temporary
# files. On a machine without an NVIDIA GPU it exits at once with status 2 and writes nothing.
#
#   scripts/gpu_check.sh                         # everything this machine can run
#   scripts/gpu_check.sh --out "$OUT/gpu_check.json" --data data/stack   # recorded observations (where
#                                                # data/stack was recorded with edge data record)
#   scripts/gpu_check.sh --help                  # all options (benchmarks/gpu_check.py)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-}
if [[ -z $PY ]]; then
  if [[ -x .venv/bin/python ]]; then PY=.venv/bin/python; else PY=python3; fi
fi
export PYTHONUNBUFFERED=1
exec "$PY" benchmarks/gpu_check.py "$@"
