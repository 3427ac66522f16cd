"""``edge doctor``: what this machine can run, and exactly why not where it cannot.

Reports Python, torch (CUDA build, cuDNN, GPUs: name, compute capability, memory), onnxruntime
(distribution, execution providers), TensorRT, the NVIDIA driver (when ``nvidia-smi`` answers),
whether this is a Jetson (``/proc/device-tree/model``, L4T release, power mode from ``nvpmodel -q``),
and every inference backend with its usability and, where it cannot run, the reason and the fix.
``--json`` prints the same as one JSON object. Always exits 0: it diagnoses, it does not judge.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from edge.cli import add_subparser

DEVICE_TREE_MODEL = Path("/proc/device-tree/model")
TEGRA_RELEASE = Path("/etc/nv_tegra_release")
ORT_DISTRIBUTIONS = ("onnxruntime", "onnxruntime-gpu", "onnxruntime-directml", "onnxruntime-openvino")
ORT_GPU_FIX = ("on x86: `pip uninstall -y onnxruntime && pip install onnxruntime-gpu` (the two "
               "cannot coexist: uninstall first); on a Jetson: NVIDIA's onnxruntime-gpu wheel for "
               "your JetPack (Jetson AI Lab index)")
TORCH_CUDA_FIX = ("install a CUDA build of torch: on x86 the cu12x/cu13x wheel from "
                  "download.pytorch.org; on a Jetson NVIDIA's JetPack wheel (Jetson AI Lab index)")

EXAMPLES = """
  edge doctor
  edge doctor --json > doctor.json
"""


def register(subparsers) -> None:
    parser = add_subparser(subparsers, "doctor", "report Python/torch/onnxruntime/TensorRT/CUDA "
                           "versions, GPUs, Jetson model and power mode, and which inference "
                           "backends can run here (with the reason for each that cannot)", EXAMPLES)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--device-tree-model", default=str(DEVICE_TREE_MODEL),
                        help="device-tree model file read for Jetson detection")
    parser.add_argument("--tegra-release", default=str(TEGRA_RELEASE), help="L4T release file")
    parser.add_argument("--nvpmodel", default="nvpmodel", help="nvpmodel executable (power mode)")
    parser.set_defaults(func=_doctor)


# --- probes ---------------------------------------------------------------------------------------
def _read_text(path: Path) -> str:
    try:
        return path.read_bytes().replace(b"\x00", b"").decode("utf-8", "replace").strip()
    except OSError:
        return ""


def _run(cmd: list[str], timeout: float = 5.0) -> tuple[int, str]:
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        return -1, str(err)
    return r.returncode, (r.stdout or "") + (r.stderr or "")


def parse_nvpmodel(text: str) -> dict[str, Any] | None:
    """``nvpmodel -q`` output ("NV Power Mode: MAXN" then the mode id) -> {"name", "id"}."""
    match = re.search(r"NV Power Mode:\s*(\S.*?)\s*$", text, re.MULTILINE)
    if not match:
        return None
    after = text[match.end():].split()
    mode_id = int(after[0]) if after and after[0].isdigit() else None
    return {"name": match.group(1), "id": mode_id}


def parse_l4t(text: str) -> str | None:
    """First line of /etc/nv_tegra_release ("# R36 (release), REVISION: 3.0, ...") -> "36.3.0"."""
    match = re.search(r"R(\d+)\s*\(release\),\s*REVISION:\s*([\d.]+)", text)
    return f"{match.group(1)}.{match.group(2)}" if match else None


def jetson_info(model_path: Path = DEVICE_TREE_MODEL, release_path: Path = TEGRA_RELEASE,
                nvpmodel: str = "nvpmodel") -> dict[str, Any]:
    """Is this a Jetson, which one, which L4T and power mode (paths injectable for tests)."""
    model = _read_text(Path(model_path))
    release = _read_text(Path(release_path))
    is_jetson = "jetson" in model.lower() or bool(release)
    out: dict[str, Any] = {"is_jetson": is_jetson, "model": model or None,
                           "l4t": parse_l4t(release) if release else None,
                           "power_mode": None, "power_mode_reason": ""}
    if not is_jetson:
        out["power_mode_reason"] = "not a Jetson"
        return out
    exe = nvpmodel if os.sep in nvpmodel else shutil.which(nvpmodel)
    if not exe:
        out["power_mode_reason"] = f"{nvpmodel} not found (it ships with JetPack's nvidia-l4t-tools)"
        return out
    code, text = _run([exe, "-q"])
    out["power_mode"] = parse_nvpmodel(text) if code == 0 else None
    if out["power_mode"] is None:
        out["power_mode_reason"] = f"`{exe} -q` gave no power mode (exit {code}): {text.strip()[:200]}"
    return out


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def torch_info() -> dict[str, Any]:
    try:
        import torch
    except Exception as err:  # noqa: BLE001 - report any import failure
        return {"installed": False, "reason": f"import torch failed: {type(err).__name__}: {err}"}
    out: dict[str, Any] = {"installed": True, "version": torch.__version__,
                           "cuda_build": torch.version.cuda, "cuda_available": False, "devices": []}
    try:
        out["cudnn"] = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    except Exception:  # noqa: BLE001
        out["cudnn"] = None
    if torch.version.cuda is None:
        out["cuda_reason"] = f"this torch ({torch.__version__}) is a CPU-only build; {TORCH_CUDA_FIX}"
        return out
    if not torch.cuda.is_available():
        out["cuda_reason"] = (f"torch {torch.__version__} is built with CUDA {torch.version.cuda} but "
                              "sees no GPU (NVIDIA driver missing or too old, or CUDA_VISIBLE_DEVICES "
                              "hides it)")
        return out
    out["cuda_available"] = True
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        dev = {"index": i, "name": p.name, "compute_capability": f"{p.major}.{p.minor}",
               "total_memory_mib": int(p.total_memory // (1 << 20)),
               "multiprocessors": int(p.multi_processor_count)}
        with contextlib.suppress(Exception):  # informative only
            dev["free_memory_mib"] = int(torch.cuda.mem_get_info(i)[0] // (1 << 20))
        out["devices"].append(dev)
    return out


def onnxruntime_info() -> dict[str, Any]:
    dists = {d: v for d in ORT_DISTRIBUTIONS if (v := _version(d))}
    out: dict[str, Any] = {"distributions": dists, "providers": []}
    if len(dists) > 1:
        out["warning"] = (f"several onnxruntime distributions are installed ({', '.join(dists)}); "
                          "they overwrite each other's files: uninstall all, then install one")
    try:
        import onnxruntime as ort
    except Exception as err:  # noqa: BLE001
        out.update(installed=False, reason=f"import onnxruntime failed: {type(err).__name__}: {err}")
        return out
    out.update(installed=True, version=ort.__version__, providers=list(ort.get_available_providers()))
    return out


def tensorrt_info() -> dict[str, Any]:
    try:
        import tensorrt as trt
    except Exception as err:  # noqa: BLE001
        return {"installed": False, "reason": f"import tensorrt failed: {type(err).__name__}: {err}"}
    return {"installed": True, "version": str(getattr(trt, "__version__", "?"))}


def driver_info() -> dict[str, Any]:
    exe = shutil.which("nvidia-smi")
    if not exe:
        return {"nvidia_smi": None}
    code, text = _run([exe, "--query-gpu=driver_version,name", "--format=csv,noheader"])
    line = text.strip().splitlines()[0] if code == 0 and text.strip() else ""
    return {"nvidia_smi": exe, "driver_version": line.split(",")[0].strip() if line else None}


def backend_table(torch_: dict[str, Any], ort: dict[str, Any], trt_reason: str) -> list[dict[str, Any]]:
    """Each way to run the VLA here: usable or the exact reason it is not, and its config."""
    rows = []

    def row(name: str, config: dict[str, Any], reason: str) -> None:
        rows.append({"name": name, "usable": not reason, "reason": reason, "config": config})

    torch_reason = "" if torch_.get("installed") else torch_.get("reason", "torch is not installed")
    row("torch (cpu)", {"name": "torch", "device": "cpu"}, torch_reason)
    cuda_reason = torch_reason or ("" if torch_.get("cuda_available") else torch_.get("cuda_reason", ""))
    row("torch (cuda, CUDA graphs per K, fp32/bf16/fp16)",
        {"name": "torch", "device": "cuda", "cuda_graphs": True}, cuda_reason)
    ort_reason = "" if ort.get("installed") else ort.get("reason", "onnxruntime is not installed")
    row("onnxruntime (cpu)", {"name": "onnxruntime", "providers": ["cpu"]}, ort_reason)
    have = ort.get("providers", [])
    dist = next(iter(ort.get("distributions", {})), "onnxruntime")
    for alias, ep in (("cuda", "CUDAExecutionProvider"), ("tensorrt", "TensorrtExecutionProvider")):
        reason = ort_reason
        if not reason and ep not in have:
            reason = f"this onnxruntime ({dist} {ort.get('version')}) has no {ep} (has {have}): {ORT_GPU_FIX}"
            if alias == "tensorrt":
                reason += "; the TensorRT EP also needs TensorRT's libraries"
        elif not reason and torch_.get("installed") and torch_.get("cuda_build") and not torch_.get("cuda_available"):
            reason = f"{ep} is in this build but no GPU is visible ({torch_.get('cuda_reason')})"
        row(f"onnxruntime ({alias} EP)", {"name": "onnxruntime", "providers": [alias, "cpu"]}, reason)
    row("tensorrt (native engines, engine cache)", {"name": "tensorrt", "precision": "fp16"}, trt_reason)
    return rows


def collect(device_tree_model: Path = DEVICE_TREE_MODEL, tegra_release: Path = TEGRA_RELEASE,
            nvpmodel: str = "nvpmodel") -> dict[str, Any]:
    """The whole report as a JSON-able dict."""
    from edge.backends.tensorrt_backend import unavailable_reason

    t, o = torch_info(), onnxruntime_info()
    trt_reason = unavailable_reason()
    return {
        "python": {"version": sys.version.split()[0], "executable": sys.executable},
        "platform": {"system": platform.platform(), "machine": platform.machine(),
                     "cpu_count": os.cpu_count()},
        "torch": t,
        "onnxruntime": o,
        "tensorrt": tensorrt_info(),
        "nvidia_driver": driver_info(),
        "jetson": jetson_info(Path(device_tree_model), Path(tegra_release), nvpmodel),
        "packages": {d: _version(d) for d in ("numpy", "onnx", "mujoco", "pybullet")},
        "backends": backend_table(t, o, trt_reason),
    }


# --- output ---------------------------------------------------------------------------------------
def format_report(r: dict[str, Any]) -> str:
    t, o, trt, j = r["torch"], r["onnxruntime"], r["tensorrt"], r["jetson"]
    lines = [f"python       {r['python']['version']} ({r['python']['executable']})",
             (f"platform     {r['platform']['system']} ({r['platform']['machine']}, "
              f"{r['platform']['cpu_count']} CPUs)")]
    if t.get("installed"):
        lines.append(f"torch        {t['version']}  CUDA build: {t['cuda_build'] or 'none (CPU-only)'}"
                     f"  cuDNN: {t.get('cudnn') or '-'}")
    else:
        lines.append(f"torch        not usable: {t['reason']}")
    for d in t.get("devices", []):
        mem = f"{d['total_memory_mib']} MiB" + (f" ({d['free_memory_mib']} free)" if "free_memory_mib" in d else "")
        lines.append(f"  gpu {d['index']}      {d['name']}  sm {d['compute_capability']}  {mem}  "
                     f"{d['multiprocessors']} SMs")
    if t.get("installed") and not t.get("cuda_available"):
        lines.append(f"  gpu        none: {t.get('cuda_reason')}")
    drv = r["nvidia_driver"]
    if drv.get("driver_version"):
        lines.append(f"driver       {drv['driver_version']}")
    if o.get("installed"):
        lines.append(f"onnxruntime  {o['version']} ({', '.join(o['distributions']) or '?'})  "
                     f"providers: {', '.join(o['providers'])}")
    else:
        lines.append(f"onnxruntime  not usable: {o['reason']}")
    if o.get("warning"):
        lines.append(f"  WARNING    {o['warning']}")
    lines.append(f"tensorrt     {trt['version'] if trt.get('installed') else 'not installed'}")
    if j["is_jetson"]:
        pm = j["power_mode"]
        lines.append(f"jetson       {j['model'] or '?'}  L4T {j['l4t'] or '?'}  power mode: "
                     + (f"{pm['name']} (id {pm['id']})" if pm else j["power_mode_reason"]))
    else:
        lines.append("jetson       no")
    lines.append("")
    lines.append("backends")
    for b in r["backends"]:
        mark = "yes" if b["usable"] else "no "
        lines.append(f"  [{mark}] {b['name']}" + ("" if b["usable"] else f"\n        {b['reason']}"))
    return "\n".join(lines)


def _doctor(args: argparse.Namespace) -> int:
    report = collect(Path(args.device_tree_model), Path(args.tegra_release), args.nvpmodel)
    if args.json:
        print(json.dumps(report, indent=2, default=str))
    else:
        print(format_report(report))
    return 0
