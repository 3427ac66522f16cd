"""Count a torch network's work per call: FLOPs, bytes and kernel launches (batch 1).

A :class:`torch.overrides.TorchFunctionMode` sees every torch function a forward pass calls — the
``F.linear`` inside ``nn.Linear``, ``F.conv2d`` inside ``nn.Conv2d``, and the attention matmuls
``q @ k.T`` / ``att @ v`` that are no module at all — so nothing is missed, whatever the model's
structure. Conventions (those of most FLOP counters, e.g. fvcore's, times 2):

* linear:  2 * rows * in * out           (bias adds not counted)
* conv2d:  2 * N * C_out * H_out * W_out * (C_in / groups) * kh * kw
* matmul / bmm / einsum: 2 * (product of every index's size)   (= 2 * M * N * K * batch)
* gru_cell: 2 * rows * (3H * in + 3H * H)   (its two gate products; the gates' elementwise work not)

Bytes are elements (weights + inputs + outputs) of the kernels a fused inference graph keeps
(matmul-class, norms, softmax, reductions); elementwise ops are assumed fused into them (counted in
``ops`` and ``elementwise_flops`` only). The device model multiplies elements by the precision's size.

    profile = count_checkpoint("edge/vla/checkpoints/stack")   # CostProfile: encoder, step, locator
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from edge.profiler.device_model import CostProfile, PartCost

_MATMUL = {"linear", "conv1d", "conv2d", "conv3d", "matmul", "__matmul__", "__rmatmul__", "mm", "bmm",
           "addmm", "baddbmm", "einsum", "scaled_dot_product_attention", "gru_cell"}
_KERNEL = {"layer_norm", "group_norm", "batch_norm", "instance_norm", "softmax", "log_softmax", "mean",
           "sum", "norm", "amax", "max", "min", "var", "std"}
_FREE = {"__getitem__", "__get__", "__setitem__", "view", "reshape", "flatten", "permute", "transpose", "t",
         "chunk", "split", "unbind", "detach", "size", "dim", "contiguous", "unsqueeze", "squeeze", "expand",
         "expand_as", "numel", "__len__", "__iter__", "__bool__", "item", "tolist", "__format__",
         "__repr__", "shape", "dtype", "device", "requires_grad_", "type", "is_floating_point", "narrow",
         "movedim", "unflatten", "__index__", "__int__", "__float__", "to", "float", "half", "double",
         "long", "int", "bool", "cpu", "cuda", "clone", "__contains__", "__eq__", "__ne__", "__hash__",
         "data", "T", "mT", "select", "as_strided", "view_as"}


def _numel(x: Any) -> int:
    if isinstance(x, torch.Tensor):
        return x.numel()
    if isinstance(x, (list, tuple)):
        return sum(_numel(v) for v in x)
    return 0


def _tensors(x: Any) -> list[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in _tensors(v)]
    return []


def _einsum_flops(eq: str, operands: list[torch.Tensor]) -> float:
    """2 x the product of every index's size (a contraction's multiply-adds)."""
    inputs = eq.replace(" ", "").split("->")[0].split(",")
    sizes: dict[str, int] = {}
    for spec, op in zip(inputs, operands):
        for ch, n in zip(spec, op.shape):
            sizes[ch] = int(n)
    return 2.0 * math.prod(sizes.values())


class _Counter(TorchFunctionMode):
    """Accumulates a :class:`PartCost`'s fields over the functions called inside the mode."""

    def __init__(self) -> None:
        super().__init__()
        self.flops = self.elementwise = 0.0
        self.weights = self.acts = 0.0
        self.kernels = self.ops = 0
        self.by_kind: dict[str, float] = {}

    def __torch_function__(self, func: Callable, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = getattr(func, "__name__", "")
        if name in _FREE:
            return out
        outs = _numel(out)
        if name in _MATMUL:
            flops, weights, acts = self._matmul(name, args, kwargs, out)
            self.flops += flops
            self.weights += weights
            self.acts += acts
            self.by_kind[name] = self.by_kind.get(name, 0.0) + flops
            self.kernels += 1
        elif name in _KERNEL:
            self.acts += _numel(args[0]) + outs
            self.kernels += 1
        elif not isinstance(out, torch.Tensor) and not (isinstance(out, (tuple, list)) and _tensors(out)):
            return out  # not a computation (shape queries, comparisons to python values, ...)
        else:
            self.elementwise += outs
        self.ops += 1
        return out

    @staticmethod
    def _matmul(name: str, args: tuple, kwargs: dict, out: Any) -> tuple[float, float, float]:
        outs = _numel(out)
        if name == "linear":
            x, w = args[0], args[1] if len(args) > 1 else kwargs["weight"]
            b = args[2] if len(args) > 2 else kwargs.get("bias")
            rows = x.numel() // x.shape[-1]
            return 2.0 * rows * w.shape[0] * w.shape[1], w.numel() + _numel(b), x.numel() + outs
        if name.startswith("conv"):
            x, w = args[0], args[1] if len(args) > 1 else kwargs["weight"]
            b = args[2] if len(args) > 2 else kwargs.get("bias")
            # per output element: (C_in / groups) * prod(kernel) multiply-adds
            return 2.0 * outs * math.prod(w.shape[1:]), w.numel() + _numel(b), x.numel() + outs
        if name == "einsum":
            eq, ops = args[0], (list(args[1]) if len(args) == 2 and isinstance(args[1], (list, tuple))
                                else list(args[1:]))
            return _einsum_flops(eq, ops), 0.0, sum(o.numel() for o in ops) + outs
        if name == "gru_cell":  # (input, hx, w_ih, w_hh[, b_ih, b_hh]): two (3H x in) products per row
            x, h, w_ih, w_hh = args[:4]
            rows = x.numel() // x.shape[-1]
            bias = sum(_numel(b) for b in args[4:6])
            return (2.0 * rows * (w_ih.numel() + w_hh.numel()), w_ih.numel() + w_hh.numel() + bias,
                    x.numel() + h.numel() + outs)
        if name == "scaled_dot_product_attention":
            q, k, v = args[:3]
            return (2.0 * q.numel() * k.shape[-2] + 2.0 * outs * k.shape[-2], 0.0,
                    q.numel() + k.numel() + v.numel() + outs)
        tensors = _tensors(args)
        if name in ("addmm", "baddbmm"):  # (bias, a, b)
            tensors = tensors[1:3]
        a, b = tensors[0], tensors[1]
        # (..., M, K) @ (..., K, N): outs = batch * M * N, times K multiply-adds each
        k = a.shape[-1] if a.dim() > 1 else a.shape[0]
        return 2.0 * outs * k, 0.0, a.numel() + b.numel() + outs

    def part(self) -> PartCost:
        return PartCost(flops=self.flops, weight_elems=self.weights, act_elems=self.acts,
                        kernels=self.kernels, ops=self.ops, elementwise_flops=self.elementwise)


def count(fn: Callable[[], Any]) -> PartCost:
    """The work of ``fn()`` (a forward pass), under ``torch.no_grad``."""
    with torch.no_grad(), _Counter() as c:
        fn()
    return c.part()


def count_model(model: Any) -> CostProfile:
    """A :class:`edge.vla.model.VLAModel`'s encoder, denoising step and scene locator, batch 1,
    on the example inputs of its spec (the counts do not depend on the values)."""
    from edge.export import example_inputs

    spec = model.spec
    inp = {k: torch.from_numpy(v) for k, v in example_inputs(spec, batch=1).items()}
    images = {cam: inp[cam] for cam in spec.cameras}
    scene = inp.get("scene")
    model = model.eval()
    with torch.no_grad():
        features = model.encode(images, inp["proprio"], inp["lang"], scene)
    x = torch.zeros(1, spec.chunk_len, spec.action_dim)
    t = torch.full((1,), 0.5)
    encoder = count(lambda: model.encode(images, inp["proprio"], inp["lang"], scene))
    step = count(lambda: model.denoise_step(x, t, features))
    locator = count(lambda: model.locate_scene(inp["front"], inp["lang"])) if model.locator is not None else None
    params = sum(p.numel() for p in model.parameters())
    return CostProfile(encoder, step, locator, params)


@functools.lru_cache(maxsize=8)
def count_checkpoint(path: str | Path, verify: bool = True) -> CostProfile:
    """:func:`count_model` of a checkpoint directory / model.pt (cached per path)."""
    from dataclasses import replace

    from edge.vla.checkpoint import load_model

    model = load_model(path, verify=verify)
    return replace(count_model(model), source=str(path))
