"""Slot for a native TensorRT backend (engines built from the ONNX export; its own issue).

Until it lands, selecting it fails with a message that says what is needed and what to use instead
(``onnxruntime`` with ``providers=["tensorrt", "cuda", "cpu"]`` runs the same graphs through
TensorRT where the GPU build of onnxruntime is installed).
"""

from __future__ import annotations

import importlib.util
from typing import Any

from edge.backends.base import BackendUnavailable

NEEDS = ("install the gpu extra (pip install 'edge[gpu]'); needs a Jetson or an NVIDIA GPU "
         "with TensorRT")


def unavailable_reason() -> str:
    """Why this backend cannot run here (always non-empty while the backend is a slot)."""
    if importlib.util.find_spec("tensorrt") is None:
        return f"tensorrt is not installed: {NEEDS}"
    return ("native TensorRT engines are not implemented yet; use backend=onnxruntime with "
            "providers=[tensorrt, cuda, cpu] to run the exported graphs through TensorRT")


class TensorRTBackend:
    """Placeholder: constructing it raises :class:`BackendUnavailable` with the reason."""

    name = "tensorrt"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise BackendUnavailable(f"backend 'tensorrt' is not available: {unavailable_reason()}")
