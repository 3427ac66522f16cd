#!/usr/bin/env bash
# Swap the CPU build of onnxruntime (a base dependency of edge-runtime) for onnxruntime-gpu at the
# same version, so the onnxruntime backend can use the CUDA / TensorRT execution providers.
#
#   scripts/install_gpu.sh [PIP]        # default: .venv/bin/pip if it exists, else pip
#   scripts/install_gpu.sh [PIP] --tensorrt   # also the gpu extra (pip's tensorrt wheels, x86 + CUDA)
#
# The two packages install the same `onnxruntime` module and must not be installed together; pip
# cannot pick one from a single requirement, so edge-runtime depends on the CPU build and this script
# replaces it. Run it again after anything reinstalls edge-runtime's dependencies (pip would bring
# the CPU build back). On a Jetson use NVIDIA's onnxruntime-gpu wheel for your JetPack instead
# (docs/install.md); TensorRT comes with JetPack there.
set -euo pipefail
PIP=${1:-}
if [[ -z "$PIP" || "$PIP" == --* ]]; then
  [[ -x .venv/bin/pip ]] && PIP=.venv/bin/pip || PIP=pip
else
  shift
fi
version=$("$PIP" show onnxruntime 2>/dev/null | awk '/^Version:/ {print $2}') || true
"$PIP" uninstall -y onnxruntime onnxruntime-gpu >/dev/null 2>&1 || true
"$PIP" install "onnxruntime-gpu${version:+==$version}"
if [[ "${1:-}" == "--tensorrt" ]]; then
  "$PIP" install "tensorrt>=10.0"
fi
"$(dirname "$PIP")/python" -c "import onnxruntime as o; print('onnxruntime', o.__version__, o.get_available_providers())" 2>/dev/null \
  || python -c "import onnxruntime as o; print('onnxruntime', o.__version__, o.get_available_providers())"
