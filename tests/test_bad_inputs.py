"""Every bad input the issue lists gets ``error: ...`` (one line, naming the flag / key / file and
the value), exit code 2, and writes nothing. One row per input: argv, a setup that prepares the bad
files in tmp_path, and the strings the message must contain.

Run in-process through :func:`edge.cli.main`; a tiny checkpoint (and its ONNX export) is made once.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from edge.cli import main


@pytest.fixture(scope="module")
def assets(tmp_path_factory):
    """A tiny checkpoint, its ONNX export, and a real 1-episode stack recording (image 16)."""
    import contextlib
    import io

    from edge.training.vla.synthetic import tiny_checkpoint

    root = tmp_path_factory.mktemp("bad-inputs")
    ckpt = tiny_checkpoint(root, steps=2)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main(["export", "--checkpoint", str(ckpt), "--out", str(root / "onnx")]) == 0
        assert main(["data", "record", "--task", "stack", "--episodes", "1", "--image-size", "16",
                     "--out", str(root / "stack16")]) == 0
    return {"ckpt": ckpt, "onnx": root / "onnx", "demos": root / "demos", "stack16": root / "stack16"}


def _copy(src_key: str, name: str, edit: Callable[[Path], None] | None = None):
    def setup(tmp: Path, a: dict) -> None:
        shutil.copytree(a[src_key], tmp / name)
        if edit is not None:
            edit(tmp / name)
    return setup


def _truncate_onnx(d: Path) -> None:
    p = d / "encoder.onnx"
    p.write_bytes(p.read_bytes()[:4000])


def _garble_onnx(d: Path) -> None:
    p = d / "encoder.onnx"
    p.write_bytes(os.urandom(p.stat().st_size))


def _truncate_episode(d: Path) -> None:
    p = sorted((d / "episodes").glob("ep_*.npz"))[1]
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])


def _garble_episode(d: Path) -> None:
    p = sorted((d / "episodes").glob("ep_*.npz"))[-1]
    p.write_bytes(b"\x00garbage" * 64)


def _nonempty_dir(tmp: Path, a: dict) -> None:
    (tmp / "old").mkdir()
    (tmp / "old" / "notes.txt").write_text("a previous run")


def _file(tmp: Path, a: dict) -> None:
    (tmp / "afile").write_text("x")
    _copy("demos", "ds")(tmp, a)


def _log_of_a_stopped_run(name: str, log: str):
    def setup(tmp: Path, a: dict) -> None:  # a run killed before its first checkpoint: its log, no state
        (tmp / name).mkdir()
        (tmp / name / log).write_text('{"env_steps": 0}\n')
    return setup


def _read_only(tmp: Path, a: dict) -> None:
    (tmp / "ro").mkdir()
    os.chmod(tmp / "ro", 0o555)
    _copy("demos", "ds")(tmp, a)


def _a_file(name: str):
    def setup(tmp: Path, a: dict) -> None:
        (tmp / name).write_text("not a directory\n")
    return setup


def _fake_run(tmp: Path, a: dict) -> None:
    (tmp / "run").mkdir()
    (tmp / "run" / "ticks.jsonl").write_text("")
    (tmp / "f").write_text("not a directory\n")


def _fake_run_meta(tmp: Path, a: dict) -> None:
    (tmp / "run").mkdir()
    (tmp / "run" / "ticks.jsonl").write_text("")
    (tmp / "run" / "meta.json").write_text('{"schema_version": 2}')


def _nonempty(name: str):
    def setup(tmp: Path, a: dict) -> None:
        (tmp / name).mkdir()
        (tmp / name / "earlier.txt").write_text("another run's file\n")
    return setup


def _planner_run(tmp: Path, a: dict) -> None:
    """A real one-episode world-model planner run in tmp/pr (three ticks)."""
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main(["run", "--policy", "comet", "--task", "reach", "--episodes", "1", "--out", str(tmp / "pr"),
                     "--set", "max_steps=3", "--no-progress"]) == 0


def _meta_dir(name: str, meta: str, ticks: bool = False):
    def setup(tmp: Path, a: dict) -> None:
        (tmp / name).mkdir()
        (tmp / name / "meta.json").write_text(meta)
        if ticks:
            (tmp / name / "ticks.jsonl").write_text("")
    return setup


def _adapter_run(tmp: Path, a: dict, vla: dict | None = None) -> None:
    """What a tiny-preset adapter run leaves to resume from (its manifest is what resume reads)."""
    import json

    from adapters.eqrl.config import EqrlConfig
    from edge.config import load_config, to_dict
    from edge.resources import config_dir

    (tmp / "ad").mkdir()
    (tmp / "ad" / "train_state.pt").write_bytes(b"")
    cfg = load_config(EqrlConfig, config_dir("train", "eqrl_tiny.yaml"), [])
    (tmp / "ad" / "manifest.json").write_text(json.dumps({"config": to_dict(cfg), "counters": {"episodes": 4},
                                                          "command": "edge train adapter --preset tiny",
                                                          **({"vla": vla} if vla else {})}))


def _adapter_run_on_another_vla(tmp: Path, a: dict) -> None:
    _adapter_run(tmp, a, vla={"path": "/elsewhere/stack", "sha256": "0" * 64})


def _fake_run_and_nonempty(tmp: Path, a: dict) -> None:
    _fake_run(tmp, a)
    _nonempty("old")(tmp, a)


def _checkpoint_and_dataset(tmp: Path, a: dict) -> None:
    """A finished checkpoint as shipped (model.pt and manifest, no training state) and a dataset."""
    _copy("ckpt", "ck", lambda d: (d / "train_state.pt").unlink(missing_ok=True))(tmp, a)
    _copy("stack16", "ds")(tmp, a)


def _expert_run_of_two(tmp: Path, a: dict) -> None:
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main(["run", "--policy", "expert", "--image-size", "16", "--episodes", "2", "--set", "max_steps=5",
                     "--out", str(tmp / "r"), "--no-progress"]) == 0


def _no_episodes(d: Path) -> None:
    shutil.rmtree(d / "episodes")
    (d / "episodes").mkdir()


@dataclass
class Row:
    id: str
    argv: list[str]  # {tmp}, {ckpt}, {onnx} are substituted
    expect: tuple[str, ...]  # substrings of the one error line
    setup: Callable[[Path, dict], None] | None = None
    root_ok: bool = True  # False: the check cannot fail as root (permissions do not apply)


TRAIN = ["train", "vla", "--preset", "tiny", "--steps", "1", "--no-eval", "--no-progress",
         "--set", "language_encoder=hash-ngram-384-v1"]
RUN = ["run", "--episodes", "1"]
ARM = ["run", "--arm", "bridge", "--port", "{tmp}/no-port", "--instruction", "stack the red block on the blue block",
       "--yes"]
ARM_PLANNER = ["run", "--arm", "bridge", "--port", "{tmp}/no-port", "--yes", "--policy", "comet", "--task", "reach"]


def _video(name: str):
    def setup(tmp: Path, a: dict) -> None:
        import cv2
        import numpy as np

        w = cv2.VideoWriter(str(tmp / name), cv2.VideoWriter_fourcc(*"MJPG"), 20.0, (32, 32))
        for i in range(40):
            w.write(np.full((32, 32, 3), i, np.uint8))
        w.release()
    return setup

ROWS = [
    Row("run-arm-without-port", ["run", "--arm", "bridge", "--instruction", "x", "--yes"], ("--port", "serial port")),
    Row("run-arm-without-instruction", ["run", "--arm", "bridge", "--port", "/dev/ttyACM0", "--yes"], ("--instruction",)),
    Row("run-arm-with-simulated-episodes", [*ARM, "--episodes", "3"], ("--episodes", "--arm bridge", "drop --episodes")),
    Row("run-arm-with-resume", [*ARM, "--resume", "--out", "{tmp}/r"], ("--resume", "drop --resume")),
    Row("run-arm-flags-without-arm", ["run", "--port", "/dev/ttyACM0", "--yes"],
        ("--port / --yes configure a real arm", "--arm bridge")),
    Row("run-arm-with-the-expert", [*ARM, "--policy", "expert"], ("--policy expert", "simulator's state")),
    Row("run-arm-with-inline-inference", [*ARM, "--inference", "inline"], ("--inference inline", "watchdog")),
    Row("run-arm-with-virtual-clock", [*ARM, "--clock", "virtual"], ("--clock virtual", "wall clock")),
    Row("run-arm-duration-zero", [*ARM, "--duration", "0"], ("--duration 0", "seconds")),
    Row("run-arm-with-planner-flags", [*ARM, "--plan-simulations", "8"],
        ("--plan-simulations", "planner", "add --policy comet or drop it")),
    Row("run-arm-planner-on-stack", [*ARM, "--policy", "comet"], ("--task stack", "--policy comet plans the object tasks")),
    Row("run-arm-planner-async", [*ARM, "--policy", "comet", "--task", "reach", "--query-mode", "async"],
        ("--query-mode async", "decides in sync", "drop --query-mode")),
    Row("run-arm-planner-num-steps", [*ARM, "--policy", "comet", "--task", "reach", "--num-steps", "5"],
        ("--num-steps 5", "one move per decision", "drop --num-steps")),
    Row("run-planner-num-steps", ["run", "--policy", "comet", "--task", "reach", "--num-steps", "1"],
        ("--num-steps 1", "one move per decision", "drop --num-steps")),
    Row("run-planner-execute", ["run", "--policy", "comet", "--task", "reach", "--execute", "3"],
        ("--execute 3", "one move per decision", "drop --execute")),
    Row("run-arm-planner-backend", [*ARM_PLANNER, "--backend", "torch"],
        ("--backend torch", "--policy comet does not run it")),
    Row("run-arm-planner-eqrl", [*ARM, "--policy", "comet", "--task", "reach", "--scheduler", "eqrl"],
        ("--scheduler eqrl", "decides every move itself")),
    Row("run-arm-planner-instruction", [*ARM, "--policy", "comet", "--task", "reach"],
        ("--instruction 'stack the red block on the blue block'", "reads no language", "drop --instruction")),
    Row("run-arm-planner-set-async", [*ARM_PLANNER, "--set", "loop.execution=async"],
        ("loop.execution=async (from --set)", "decides in sync", "drop it")),
    Row("run-arm-planner-set-execute", [*ARM_PLANNER, "--set", "scheduler.fixed.execute=3"],
        ("scheduler.fixed.execute=3 (from --set)", "one move per decision")),
    Row("run-arm-set-a-simulated-episode-setting", [*ARM, "--set", "scene.sim=pybullet"],
        ("scene.sim=pybullet (from --set)", "simulated arm's episodes", "drop it")),
    Row("run-duration-without-arm", ["run", "--duration", "5"], ("--duration configures a real arm", "--arm bridge")),
    Row("run-arm-camera-not-name-source", [*ARM, "--camera", "front"], ("--camera 'front'", "NAME=SOURCE")),
    Row("run-arm-camera-twice", [*ARM, "--camera", "front=0", "--camera", "front=1"], ("--camera 'front=1'", "twice")),
    Row("run-arm-camera-the-policy-does-not-see", [*ARM, "--checkpoint", "{ckpt}", "--camera", "wrist={tmp}/v.avi"],
        ("--camera", "missing front", "wrist not seen"), _video("v.avi")),
    Row("run-arm-camera-absent", [*ARM, "--checkpoint", "{ckpt}", "--camera", "front=/dev/no-camera"],
        ("--camera", "cannot open camera '/dev/no-camera'")),
    Row("run-arm-port-absent", [*ARM, "--checkpoint", "{ckpt}", "--camera", "front={tmp}/v.avi", "--out", "{tmp}/run"],
        ("--port", "no-port"), _video("v.avi")),
    Row("run-out-not-empty", [*RUN, "--policy", "expert", "--image-size", "16", "--out", "{tmp}/old"],
        ("--out", "old", "not empty", "--resume"), _nonempty_dir),
    Row("run-resume-nothing", [*RUN, "--policy", "expert", "--out", "{tmp}/old", "--resume"],
        ("--resume", "old", "no meta.json"), _nonempty_dir),
    Row("run-resume-an-hil-trace", [*RUN, "--policy", "expert", "--out", "{tmp}/host", "--resume"],
        ("--resume", "an edge hil host trace", "choose another --out"),
        _meta_dir("host", '{"schema_version": 2, "hil_host": {}, "config": {}}', ticks=True)),
    Row("run-resume-a-folder-of-other-files", [*RUN, "--policy", "expert", "--out", "{tmp}/old", "--resume"],
        ("--resume", "no meta.json", "choose another --out"), _nonempty_dir),
    Row("run-resume-planner-run-without-its-policy", ["run", "--out", "{tmp}/pr", "--resume"],
        ("--resume", "pr is a world-model planner run", "--policy comet --task reach"), _planner_run),
    Row("run-truncated-onnx", [*RUN, "--checkpoint", "{tmp}/x", "--out", "{tmp}/r"],
        ("encoder.onnx", "sha256"), _copy("onnx", "x", _truncate_onnx)),
    Row("run-garbled-onnx-no-verify", [*RUN, "--checkpoint", "{tmp}/x", "--no-verify", "--out", "{tmp}/r"],
        ("--checkpoint", "encoder.onnx", "onnxruntime"), _copy("onnx", "x", _garble_onnx)),
    Row("run-truncated-onnx-no-verify", [*RUN, "--checkpoint", "{tmp}/x", "--no-verify", "--out", "{tmp}/r"],
        ("--checkpoint", "encoder.onnx", "truncated or corrupt"), _copy("onnx", "x", _truncate_onnx)),
    Row("run-checkpoint-missing", [*RUN, "--checkpoint", "{tmp}/nonexistent", "--out", "{tmp}/r"],
        ("--checkpoint", "nonexistent", "not found")),
    Row("run-expert-with-checkpoint", [*RUN, "--policy", "expert", "--checkpoint", "{ckpt}", "--out", "{tmp}/r"],
        ("--checkpoint", "--policy expert")),
    Row("run-image-size-64", [*RUN, "--checkpoint", "{ckpt}", "--image-size", "64", "--out", "{tmp}/r"],
        ("--image-size 64", "96x96", "checkpoint")),
    Row("run-image-size-0", [*RUN, "--checkpoint", "{ckpt}", "--image-size", "0", "--out", "{tmp}/r"],
        ("--image-size 0", "96x96")),
    Row("run-latency-ms-without-constant", [*RUN, "--checkpoint", "{ckpt}", "--latency-ms", "50", "--out", "{tmp}/r"],
        ("--latency-ms 50", "--latency constant", "measured")),
    Row("run-task-push-with-stack-vla", [*RUN, "--checkpoint", "{ckpt}", "--task", "push", "--out", "{tmp}/r"],
        ("--task push", "'stack'")),
    Row("data-info-truncated-npz", ["data", "info", "{tmp}/ds"],
        ("ep_0000001.npz", "truncated or corrupt"), _copy("demos", "ds", _truncate_episode)),
    Row("data-info-garbled-npz", ["data", "info", "{tmp}/ds"],
        ("ep_0000003.npz", "not a readable episode"), _copy("demos", "ds", _garble_episode)),
    Row("train-truncated-npz", [*TRAIN, "--data", "{tmp}/ds", "--out", "{tmp}/ck"],
        ("--data", "ep_0000001.npz", "truncated or corrupt"), _copy("demos", "ds", _truncate_episode)),
    Row("train-out-under-a-file", [*TRAIN, "--data", "{tmp}/ds", "--out", "{tmp}/afile/ck"],
        ("--out", "afile", "not a directory"), _file),
    Row("train-out-read-only", [*TRAIN, "--data", "{tmp}/ds", "--out", "{tmp}/ro/ck"],
        ("--out", "ro/ck", "not writable"), _read_only, root_ok=False),
    Row("train-slot-encoder-set-not-a-number", ["train", "slot-encoder", "--preset", "tiny", "--out", "{tmp}/se",
                                                "--set", "carry_iters=x"],
        ("--set", "carry_iters=x", "whole number")),
    Row("train-slot-encoder-set-out-of-range", ["train", "slot-encoder", "--preset", "tiny", "--out", "{tmp}/se",
                                                "--set", "carry_iters=11"],
        ("carry_iters=11", "[0, 10]")),
    Row("train-slot-encoder-init-from-missing", ["train", "slot-encoder", "--preset", "tiny", "--out", "{tmp}/se",
                                                 "--init-from", "{tmp}/nowhere"],
        ("--init-from", "nowhere", "no train_state.pt or manifest.json")),
    Row("train-slot-encoder-lr-zero", ["train", "slot-encoder", "--preset", "tiny", "--out", "{tmp}/se",
                                       "--lr", "0"],
        ("--lr", "0", "finite number > 0")),
    Row("train-pixel-encoder-set-unknown-key", ["train", "pixel-encoder", "--out", "{tmp}/pe", "--set", "depth=3"],
        ("--set", "depth=3", "image_size, channels, width, fg_weight")),
    Row("train-pixel-encoder-image-size", ["train", "pixel-encoder", "--out", "{tmp}/pe", "--set", "image_size=40"],
        ("image_size=40", "multiple of 16")),
    Row("train-pixel-encoder-steps-zero", ["train", "pixel-encoder", "--out", "{tmp}/pe", "--steps", "0"],
        ("--steps", "0", ">= 1")),
    Row("train-world-model-oracle-slots-not-one-per-entity", ["train", "world-model", "--obs", "oracle", "--out",
                                                              "{tmp}/wm", "--set", "model.num_slots=6"],
        ("--set model.num_slots=6", "one slot per entity, 5 on push3", "model.num_slots=5")),
    Row("train-world-model-over-a-stopped-run", ["train", "world-model", "--preset", "tiny", "--out", "{tmp}/wm"],
        ("--out", "curve.jsonl of a run stopped before its first checkpoint", "choose another --out"),
        _log_of_a_stopped_run("wm", "curve.jsonl")),
    Row("train-adapter-over-a-stopped-run", ["train", "adapter", "--preset", "tiny", "--out", "{tmp}/ad"],
        ("--out", "train_log.jsonl of a run stopped before its first save", "choose another --out"),
        _log_of_a_stopped_run("ad", "train_log.jsonl")),
    Row("train-adapter-unread-eval-setting", ["train", "adapter", "--preset", "tiny", "--set", "eval_every=50",
                                              "--out", "{tmp}/ad"], ("eval_every=50", "no periodic evaluation")),
    Row("train-adapter-resume-other-settings", ["train", "adapter", "--resume", "--out", "{tmp}/ad"],
        ("--resume", "started with other settings", "(now ", "started by: edge train adapter --preset tiny"),
        _adapter_run),
    Row("train-adapter-resume-fewer-episodes", ["train", "adapter", "--preset", "tiny", "--resume", "--set",
                                                "episodes=2", "--out", "{tmp}/ad"],
        ("episodes=2", "4 episodes already"), _adapter_run),
    Row("train-vla-out-holds-a-checkpoint", [*TRAIN, "--data", "{tmp}/ds", "--out", "{tmp}/ck"],
        ("--out", "a VLA checkpoint without its training state", "choose another --out"), _checkpoint_and_dataset),
    Row("train-vla-no-eval-and-eval-episodes", [*TRAIN, "--eval-episodes", "2", "--data", "{tmp}/ds", "--out",
                                                "{tmp}/t"], ("--eval-episodes 2", "--no-eval"), _copy("stack16", "ds")),
    Row("data-record-into-a-checkpoint", ["data", "record", "--task", "stack", "--episodes", "1", "--out", "{tmp}/ck"],
        ("--out", "holds a VLA checkpoint", "not a demonstration dataset"), _copy("ckpt", "ck")),
    Row("data-record-negative-seed", ["data", "record", "--task", "stack", "--episodes", "1", "--seed", "-5",
                                      "--out", "{tmp}/d"], ("--seed -5", ">= 0")),
    Row("data-record-image-size-of-another-checkpoint", ["data", "record", "--task", "stack", "--episodes", "1",
                                                         "--checkpoint", "{ckpt}", "--image-size", "64",
                                                         "--out", "{tmp}/d"],
        ("--image-size 64", "96x96", "--image-size 96")),
    Row("data-record-backend-without-checkpoint", ["data", "record", "--task", "stack", "--episodes", "1",
                                                   "--backend", "torch", "--out", "{tmp}/d"],
        ("--backend torch", "DAgger recording", "add --checkpoint")),
    Row("data-record-dagger-action-noise", ["data", "record", "--task", "stack", "--episodes", "1", "--checkpoint",
                                            "{ckpt}", "--action-noise", "0.008", "--out", "{tmp}/d"],
        ("--action-noise 0.008", "the policy drives", "drop --action-noise")),
    Row("data-record-dagger-keep-failures", ["data", "record", "--task", "stack", "--episodes", "1", "--checkpoint",
                                             "{ckpt}", "--keep-failures", "--out", "{tmp}/d"],
        ("--keep-failures", "keeps every episode already")),
    Row("hil-replay-with-checkpoint", ["hil", "--all", "--policy", "replay", "--checkpoint", "{ckpt}"],
        ("--checkpoint", "--policy replay", "loads no checkpoint")),
    Row("data-record-n-blocks-on-push", ["data", "record", "--task", "push", "--n-blocks", "3", "--episodes", "1",
                                         "--out", "{tmp}/d"], ("--n-blocks 3", "--task push")),
    Row("export-out-holds-other-files", ["export", "--checkpoint", "{ckpt}", "--out", "{tmp}/ds"],
        ("--out", "holds other files", "not an earlier export"), _copy("stack16", "ds")),
    Row("run-thread-on-the-virtual-clock-async", [*RUN, "--inference", "thread", "--out", "{tmp}/r"],
        ("--inference thread", "virtual clock", "--query-mode sync")),
    Row("run-eqrl-with-num-steps", [*RUN, "--scheduler", "eqrl", "--num-steps", "3", "--out", "{tmp}/r"],
        ("--num-steps 3", "chooses K and C per query")),
    Row("run-device-without-latency-device", [*RUN, "--device", "orin-nx", "--out", "{tmp}/r"],
        ("--device orin-nx", "--latency device")),
    Row("run-rtc-soft-steps-without-rtc", [*RUN, "--rtc-soft-steps", "5", "--out", "{tmp}/r"],
        ("--rtc-soft-steps 5", "--seam rtc")),
    # settings nothing in the run would read (refused rather than recorded as if they applied)
    Row("run-seam-in-sync", [*RUN, "--seam", "weighted", "--query-mode", "sync", "--out", "{tmp}/r"],
        ("--seam weighted", "nothing to join", "--query-mode async")),
    Row("run-expert-seam", [*RUN, "--policy", "expert", "--seam", "rtc", "--out", "{tmp}/r"],
        ("--seam rtc", "--policy expert decides in sync", "drop --seam")),
    Row("run-expert-no-verify", [*RUN, "--policy", "expert", "--no-verify", "--out", "{tmp}/r"],
        ("--no-verify", "loads none")),
    Row("run-expert-noise-temperature", [*RUN, "--policy", "expert", "--noise-temperature", "2", "--out", "{tmp}/r"],
        ("--noise-temperature 2.0", "--policy expert draws no flow-matching noise")),
    Row("run-eqrl-noise-temperature", [*RUN, "--scheduler", "eqrl", "--noise-temperature", "2", "--out", "{tmp}/r"],
        ("--noise-temperature 2.0", "adapter draws each query's noise")),
    Row("run-planner-backend", [*RUN, "--policy", "comet", "--task", "reach", "--backend", "torch", "--out", "{tmp}/r"],
        ("--backend torch", "--plan-backend")),
    Row("run-planner-checkpoint", [*RUN, "--policy", "comet", "--task", "reach", "--checkpoint", "{ckpt}",
                                   "--out", "{tmp}/r"], ("--checkpoint", "--world-model DIR")),
    Row("run-set-dvac-under-fixed", [*RUN, "--set", "scheduler.dvac.kappa=2", "--out", "{tmp}/r"],
        ("scheduler.dvac.kappa=2.0 (from --set)", "this run's scheduler is fixed", "add --scheduler dvac",
         "or drop that --set")),
    Row("run-set-fixed-k-under-eqrl", [*RUN, "--scheduler", "eqrl", "--set", "num_steps=3", "--out", "{tmp}/r"],
        ("scheduler.fixed.num_steps=3 (from --set)", "its adapter chooses K and C")),
    Row("run-planner-set-scheduler", [*RUN, "--policy", "comet", "--task", "reach", "--set", "scheduler=eqrl",
                                      "--out", "{tmp}/r"], ("scheduler.kind=eqrl (from --set)", "its own fixed schedule")),
    Row("hil-replay-set-noise-temperature", ["hil", "--all", "--policy", "replay", "--set", "worker.noise_temperature=0.9"],
        ("--set worker.noise_temperature=0.9", "replayed expert")),
    Row("hil-set-worker-cpus", ["hil", "--all", "--policy", "replay", "--set", "worker.cpus=0"],
        ("--set worker.cpus=0", "inference is thread", "drop it")),
    # options are for a user's pkg.module:factory only: a registered one dropped them without a word
    Row("run-set-scheduler-options-registered", [*RUN, "--set", "scheduler.options.gain=2", "--out", "{tmp}/r"],
        ("scheduler.options={'gain': 2}", "read only by your own 'pkg.module:factory' scheduler",
         "this run's scheduler is fixed", "scheduler.fixed.*")),
    Row("run-set-policy-options-registered", [*RUN, "--policy", "comet", "--task", "reach", "--set",
                                              "policy.options.sims=4", "--out", "{tmp}/r"],
        ("policy.options={'sims': 4}", "this run's policy is comet", "policy.comet.*")),
    Row("run-set-adapter-noise-without-eqrl", [*RUN, "--set", "adapter_noise=mean", "--out", "{tmp}/r"],
        ("scheduler.eqrl.noise=mean", "add --scheduler eqrl")),
    Row("run-set-latency-ms-measured", [*RUN, "--set", "latency_ms=50", "--out", "{tmp}/r"],
        ("clock.latency_ms=50.0 (from --set)", "this run's latency is measured", "--latency constant")),
    Row("run-set-blend-new-without-weighted", [*RUN, "--set", "queue.blend_new=0.9", "--out", "{tmp}/r"],
        ("queue.blend_new=0.9", "add --seam weighted")),
    Row("run-set-loop-cpus-virtual", [*RUN, "--set", "loop.cpus=0", "--out", "{tmp}/r"],
        ("loop.cpus=0", "clock is virtual", "--clock real")),
    Row("run-set-worker-cpus-not-process", [*RUN, "--set", "worker.cpus=0", "--out", "{tmp}/r"],
        ("worker.cpus=0", "add --inference process")),
    Row("run-expert-noise-temperature-at-default", [*RUN, "--policy", "expert", "--noise-temperature", "0.5",
                                                    "--out", "{tmp}/r"],
        ("--noise-temperature 0.5", "--policy expert draws no flow-matching noise", "drop it")),
    Row("run-eqrl-noise-temperature-at-default", [*RUN, "--scheduler", "eqrl", "--noise-temperature=0.5",
                                                  "--out", "{tmp}/r"],
        ("--noise-temperature 0.5", "adapter draws each query's noise")),
    Row("profile-checkpoint-missing", ["profile", "--episodes", "1", "--checkpoint", "{tmp}/none", "--out", "{tmp}/p"],
        ("--checkpoint", "none: not found", "edge train vla")),
    Row("data-record-checkpoint-missing", ["data", "record", "--episodes", "1", "--checkpoint", "{tmp}/none",
                                           "--out", "{tmp}/d"],
        ("--checkpoint", "none: not found", "edge train vla")),
    Row("run-set-not-key-value", [*RUN, "--set", "max_steps", "--out", "{tmp}/r"],
        ("--set 'max_steps': give key=value",)),
    Row("run-scheduler-unknown-names-the-flag", [*RUN, "--scheduler", "foo", "--out", "{tmp}/r"],
        ("--scheduler foo:", "choose fixed, dvac, eqrl")),
    Row("run-config-missing-names-the-flag", [*RUN, "--config", "{tmp}/none.yaml", "--out", "{tmp}/r"],
        ("--config", "none.yaml: not found")),
    Row("run-inference-process-virtual-names-the-flag", [*RUN, "--inference", "process", "--out", "{tmp}/r"],
        ("--inference process:", "add --clock real")),
    Row("run-adapter-typo-suggests", [*RUN, "--scheduler", "eqrl", "--adapter", "stack_eficient", "--out", "{tmp}/r"],
        ("no EQRL adapter at stack_eficient", "did you mean stack_efficient?")),
    Row("data-info-missing", ["data", "info", "{tmp}/none"], ("none: does not exist", "edge data record")),
    Row("run-set-torch-threads-inline", [*RUN, "--set", "worker.torch_threads=1", "--out", "{tmp}/r"],
        ("worker.torch_threads=1", "runs inline", "add --inference thread|process")),
    Row("run-planner-set-torch-threads-inline", ["run", "--policy", "comet", "--task", "reach",
                                                 "--set", "worker.torch_threads=1", "--out", "{tmp}/r"],
        ("worker.torch_threads=1", "runs inline", "policy.comet.plan_threads=N")),
    Row("run-vla-set-plan-threads", [*RUN, "--set", "policy.comet.plan_threads=2", "--out", "{tmp}/r"],
        ("policy.comet.plan_threads=2", "add --policy comet")),
    Row("run-num-steps-zero-names-the-flag", [*RUN, "--num-steps", "0", "--out", "{tmp}/r"],
        ("--num-steps:", "out of range")),
    Row("run-n-blocks-on-push", [*RUN, "--task", "push", "--policy", "expert", "--n-blocks", "3", "--out", "{tmp}/r"],
        ("--n-blocks 3", "--task push")),
    Row("run-resume-with-fewer-episodes", ["run", "--policy", "expert", "--image-size", "16", "--episodes", "1",
                                           "--set", "max_steps=5", "--out", "{tmp}/r", "--resume"],
        ("--episodes 1", "2 episodes already"), _expert_run_of_two),
    Row("run-checkpoint-a-dataset", [*RUN, "--checkpoint", "{tmp}/ds", "--out", "{tmp}/r"],
        ("no VLA checkpoint at", "it is a demonstration dataset"), _copy("stack16", "ds")),
    Row("run-checkpoint-truncated", [*RUN, "--checkpoint", "{tmp}/ck", "--out", "{tmp}/r"],
        ("model.pt: sha256", "does not match manifest.json"),
        _copy("ckpt", "ck", lambda d: (d / "model.pt").write_bytes((d / "model.pt").read_bytes()[:5000]))),
    Row("train-adapter-resume-another-vla", ["train", "adapter", "--preset", "tiny", "--resume", "--checkpoint",
                                             "{ckpt}", "--out", "{tmp}/ad"],
        ("--checkpoint", "not the VLA", "/elsewhere/stack", "started by: edge train adapter --preset tiny"),
        _adapter_run_on_another_vla),
    Row("train-adapter-preset-and-config", ["train", "adapter", "--preset", "tiny", "--config",
                                            "configs/train/eqrl_tiny.yaml", "--out", "{tmp}/ad"],
        ("--preset tiny", "--config", "give one of them")),
    Row("data-scenes-over-a-dataset", ["data", "scenes", "--episodes", "1", "--out", "{tmp}/ds"],
        ("--out", "not empty", "choose another --out"), _copy("stack16", "ds")),
    Row("data-record-into-scenes", ["data", "record", "--task", "stack", "--episodes", "1", "--image-size", "16",
                                    "--out", "{tmp}/sc"],
        ("--out", "holds scenes", "not a demonstration dataset"),
        _meta_dir("sc", '{"format": "edge-scenes", "version": 1, "count": 1}')),
    Row("data-info-of-scenes", ["data", "info", "{tmp}/sc"], ("holds scenes", "not a demonstration dataset"),
        _meta_dir("sc", '{"format": "edge-scenes", "version": 1, "count": 1}')),
    Row("report-out-holds-other-files", ["report", "{tmp}/run", "--out", "{tmp}/old"],
        ("--out", "old", "other files", "choose another --out"), _fake_run_and_nonempty),
    Row("profile-reference-of-no-arm", ["profile", "--reference", "fixed:3x8", "--episodes", "1", "--out", "{tmp}/p"],
        ("--reference", "fixed:3x8", "none of the arms")),
    Row("profile-runs-a-file", ["profile", "--runs", "{tmp}/f", "--out", "{tmp}/p"], ("--runs", "a file"),
        _a_file("f")),
    Row("profile-runs-with-run-setup", ["profile", "--runs", "{tmp}/r", "--episodes", "7", "--seed", "3",
                                        "--out", "{tmp}/p"], ("--episodes", "re-reads run directories",
                                                              "drop --episodes / --seed")),
    Row("profile-latency-ms-measured", ["profile", "--latency", "measured", "--latency-ms", "50", "--out", "{tmp}/p"],
        ("--latency-ms 50", "--latency constant")),
    Row("profile-latency-device-constant", ["profile", "--latency-device", "agx-orin", "--out", "{tmp}/p"],
        ("--latency-device agx-orin", "add --latency device")),
    Row("profile-shard-episodes-negative", ["profile", "--shard-episodes", "-1", "--out", "{tmp}/p"],
        ("--shard-episodes=-1", ">= 0")),
    Row("profile-noise-temperature-no-arm-reads", ["profile", "--schedulers", "eqrl", "--noise-temperature", "2",
                                                   "--out", "{tmp}/p"], ("--noise-temperature 2", "draws its own")),
    Row("expert-eval-out-a-directory", ["expert", "eval", "--episodes", "1", "--out", "{tmp}/old"],
        ("--out", "is a directory"), _nonempty_dir),
    Row("hil-unknown-robot", ["hil", "--scenario", "link_cut", "--policy", "replay", "--set", "robot=ur5",
                              "--out", "{tmp}/h"], ("robot=ur5", "unknown robot")),
    Row("hil-checkpoint-a-file", ["hil", "--scenario", "link_cut", "--checkpoint", "{tmp}/f", "--out", "{tmp}/h"],
        ("--checkpoint", "or use --policy replay"), _a_file("f")),
    Row("hil-execute-over-chunk", ["hil", "--scenario", "link_cut", "--policy", "replay", "--set", "execute=40",
                                   "--out", "{tmp}/h"], ("execute=40", "chunk_len 16")),
    Row("hil-scheduler-kind", ["hil", "--scenario", "link_cut", "--policy", "replay", "--set",
                               "scheduler.kind=dvac", "--out", "{tmp}/h"],
        ("--set scheduler.kind=dvac", "fixed schedule")),
    Row("hil-vla-on-pybullet", ["hil", "--scenario", "link_cut", "--policy", "vla", "--set", "sim=pybullet",
                                "--out", "{tmp}/h"], ("sim=pybullet", "wrist camera", "--policy replay")),
    Row("hil-unknown-sweep-row", ["hil", "--scenario", "latency_sweep@11ms", "--out", "{tmp}/h"],
        ("--scenario latency_sweep@11ms", "latency_sweep@10ms")),
    Row("hil-catalogue-a-file", ["hil", "--scenario", "link_cut", "--catalogue", "{tmp}/f", "--out", "{tmp}/h"],
        ("--catalogue", "a file"), _a_file("f")),
    Row("hil-watchdog-not-longer-than-the-period", ["hil", "--scenario", "link_cut", "--policy", "replay", "--set",
                                                    "watchdog_ms=30", "--out", "{tmp}/h"],
        ("watchdog_ms=30", "control period (50 ms)")),
    Row("hil-list-with-scenario", ["hil", "--list", "--scenario", "link_cut"], ("--list", "runs nothing")),
    Row("train-world-model-pixels-slot-encoder", ["train", "world-model", "--preset", "tiny", "--out", "{tmp}/wm",
                                                 "--obs", "pixels", "--encoder", "world_models/checkpoints/slots_push3"],
        ("--encoder", "slots_push3", "no pretrained pixel encoder")),
    Row("train-world-model-oracle-encoder", ["train", "world-model", "--preset", "tiny", "--out", "{tmp}/wm",
                                             "--obs", "oracle", "--encoder", "world_models/checkpoints/slots_push3_v2"],
        ("--encoder", "--obs oracle", "leave it out")),
    Row("train-world-model-pixels-carry-iters", ["train", "world-model", "--preset", "tiny", "--out", "{tmp}/wm",
                                                 "--obs", "pixels", "--set", "encoder_carry_iters=2"],
        ("encoder_carry_iters=2", "--obs slots only", "--obs pixels")),
    Row("train-adapter-latency-not-a-number", ["train", "adapter", "--preset", "tiny", "--out", "{tmp}/ad",
                                               "--set", "query_mode=async", "--set", "train_latency_ms=0,fast"],
        ("train_latency_ms", "'fast' is not a number")),
    Row("train-adapter-latency-needs-async", ["train", "adapter", "--preset", "tiny", "--out", "{tmp}/ad",
                                              "--set", "train_latency_ms=100"],
        ("train_latency_ms='100'", "query_mode=async")),
    Row("run-expert-execute-4", [*RUN, "--policy", "expert", "--execute", "4", "--out", "{tmp}/r"],
        ("--execute 4", "--policy expert")),
    Row("run-adapter-unknown-name", [*RUN, "--scheduler", "eqrl", "--adapter", "stack_fast", "--out", "{tmp}/r"],
        ("stack_fast",)),
    Row("run-set-unknown-section-key", [*RUN, "--set", "scheduler.dvac.kapa=2", "--out", "{tmp}/r"],
        ("scheduler.dvac.kapa", "--set")),
    Row("run-set-dvac-min-above-max", [*RUN, "--scheduler", "dvac", "--set", "scheduler.dvac.min_execute=9",
                                       "--out", "{tmp}/r"],
        ("min_execute=9", "max_execute=8")),
    Row("run-config-safety-out-of-range", [*RUN, "--config", "{tmp}/bad.yaml", "--out", "{tmp}/r"],
        ("safety.max_ee_step_m=2.0", "out of range", "bad.yaml"), lambda t, a: (t / "bad.yaml").write_text(
            "safety:\n  max_ee_step_m: 2.0\n")),
    Row("hil-set-unknown-rig-key", ["hil", "--scenario", "link_cut", "--set", "watchdog=300", "--out", "{tmp}/h"],
        ("watchdog", "allowed keys", "watchdog_ms")),
    Row("hil-set-runtime-key-out-of-range", ["hil", "--scenario", "link_cut", "--set", "safety.stale_s=-1",
                                             "--out", "{tmp}/h"],
        ("safety.stale_s=-1", "out of range")),
    Row("hil-set-out-of-range", ["hil", "--scenario", "link_cut", "--set", "watchdog_ms=0", "--out", "{tmp}/h"],
        ("watchdog_ms=0", "out of range")),
    Row("export-opset-3", ["export", "--checkpoint", "{ckpt}", "--out", "{tmp}/e", "--opset", "3"],
        ("--opset 3", "[7, 20]")),
    Row("export-tolerance-negative", ["export", "--checkpoint", "{ckpt}", "--out", "{tmp}/e",
                                      "--tolerance", "-1"],
        ("--tolerance -1", "> 0")),
    Row("record-resume-other-task", ["data", "record", "--task", "pick_place", "--episodes", "1",
                                     "--image-size", "16", "--out", "{tmp}/ds"],
        ("--out", "task='stack'", "task='pick_place'"), _copy("stack16", "ds")),
    Row("record-resume-other-cameras", ["data", "record", "--task", "stack", "--wrist", "--episodes", "1",
                                        "--image-size", "16", "--out", "{tmp}/ds"],
        ("--out", "wrist_camera=False", "wrist_camera=True"), _copy("stack16", "ds")),
    Row("record-resume-other-image-size", ["data", "record", "--task", "stack", "--episodes", "1",
                                           "--image-size", "32", "--out", "{tmp}/ds"],
        ("--out", "image_size=16", "image_size=32"), _copy("stack16", "ds")),
    Row("run-execute-over-chunk", [*RUN, "--execute", "20", "--out", "{tmp}/r"], ("--execute 20", "chunks of 16")),
    Row("run-adapter-without-eqrl", [*RUN, "--adapter", "stack", "--out", "{tmp}/r"],
        ("--adapter stack", "--scheduler eqrl")),
    Row("run-adapter-set-without-eqrl", [*RUN, "--set", "adapter=stack", "--out", "{tmp}/r"],
        ("scheduler.eqrl.adapter=stack", "--set", "--scheduler eqrl")),
    Row("profile-arm-execute-over-chunk", ["profile", "--schedulers", "fixed:2x8,fixed:10x20", "--episodes", "1",
                                           "--out", "{tmp}/p"], ("fixed:10x20", "C=20", "chunk of 16")),
    Row("train-data-is-a-run", [*TRAIN, "--data", "{tmp}/run", "--out", "{tmp}/t"], ("--data", "a run directory"),
        _fake_run_meta),
    Row("hil-checkpoint-missing", ["hil", "--scenario", "link_cut", "--checkpoint", "{tmp}/nope", "--out", "{tmp}/h"],
        ("--checkpoint", "not found")),
    Row("hil-out-not-empty", ["hil", "--scenario", "link_cut", "--policy", "replay", "--out", "{tmp}/h"],
        ("--out", "not empty"), _nonempty("h")),
    Row("export-data-missing", ["export", "--checkpoint", "{ckpt}", "--out", "{tmp}/e", "--data", "{tmp}/nope"],
        ("--data", "not a demonstration dataset")),
    Row("export-data-no-episodes", ["export", "--checkpoint", "{ckpt}", "--out", "{tmp}/e", "--data", "{tmp}/ds"],
        ("--data", "no episodes"), _copy("stack16", "ds", _no_episodes)),
    Row("report-out-is-a-file", ["report", "{tmp}/run", "--out", "{tmp}/f"], ("--out", "not a directory"), _fake_run),
    Row("report-of-a-dataset", ["report", "{tmp}/ds"], ("demonstration dataset",), _copy("stack16", "ds")),
    Row("report-video-max-mb-negative", ["report", "{tmp}/run", "--video-max-mb", "-1"], ("--video-max-mb -1",),
        _fake_run),
    Row("train-adapter-out-is-a-file", ["train", "adapter", "--preset", "tiny", "--out", "{tmp}/f"],
        ("--out", "not a directory"), _a_file("f")),
    Row("train-adapter-resume-nothing", ["train", "adapter", "--preset", "tiny", "--resume", "--out", "{tmp}/a"],
        ("--resume", "no adapter training run")),
    Row("train-world-model-out-is-a-file", ["train", "world-model", "--preset", "tiny", "--out", "{tmp}/f"],
        ("--out", "not a directory"), _a_file("f")),
    Row("record-policy-flag-without-checkpoint", ["data", "record", "--task", "stack", "--episodes", "1",
                                                  "--execute", "4", "--out", "{tmp}/d"], ("--execute 4", "--checkpoint")),
    Row("train-world-model-encoder-of-another-kind", ["train", "world-model", "--preset", "tiny", "--obs", "slots",
                                                      "--encoder", "{ckpt}", "--out", "{tmp}/w"],
        ("--encoder", "is not a slot encoder")),
    Row("train-slot-encoder-window-longer-than-an-episode", ["train", "slot-encoder", "--preset", "tiny", "--frames", "48",
                                                              "--seq-len", "100", "--out", "{tmp}/s"], ("--seq-len 100",)),
    Row("train-slot-encoder-window-loss-on-single-frames", ["train", "slot-encoder", "--preset", "tiny", "--frames", "48",
                                                            "--seq-len", "1", "--set", "predict_weight=1", "--out",
                                                            "{tmp}/s"], ("--seq-len 1", "predict_weight=1 needs")),
    Row("data-scenes-out-is-a-file", ["data", "scenes", "--episodes", "1", "--out", "{tmp}/f"],
        ("--out", "not a directory"), _a_file("f")),
]


def _main_without_dac_override(argv: list[str], cwd: Path) -> tuple[int, str]:
    """``edge ARGV`` in a child process that keeps root's uid but not the capabilities that bypass
    file permissions (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH), so a read-only directory is read-only."""
    caps = "-dac_override,-dac_read_search"
    code = "import sys; from edge.cli import main; sys.exit(main(sys.argv[1:]))"
    res = subprocess.run(["setpriv", "--bounding-set", caps, f"--inh-caps={caps}", "--",
                          sys.executable, "-c", code, *argv], cwd=cwd, capture_output=True, text=True,
                         check=False, timeout=300, env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    return res.returncode, res.stderr.strip()


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_bad_input_is_one_clear_line_exit_2_nothing_written(row, assets, tmp_path, capsys, monkeypatch):
    drop = not row.root_ok and os.geteuid() == 0  # root bypasses permissions: run without that power
    if drop and shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: directory permissions do not apply")
    monkeypatch.delenv("EDGE_DEBUG", raising=False)
    monkeypatch.chdir(tmp_path)  # a default runs/<time> would land here, and be caught below
    if row.setup is not None:
        row.setup(tmp_path, assets)
    before = _tree(tmp_path)
    argv = [a.format(tmp=tmp_path, ckpt=assets["ckpt"], onnx=assets["onnx"]) for a in row.argv]
    try:
        if drop:
            code, err = _main_without_dac_override(argv, tmp_path)
        else:
            code = main(argv)
            err = capsys.readouterr().err.strip()
    finally:
        for p in tmp_path.rglob("*"):  # let pytest clean up read-only dirs
            if p.is_dir():
                os.chmod(p, 0o755)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for s in row.expect:
        assert s in lines[0], f"{s!r} not in {lines[0]!r}"
    assert "Traceback" not in err
    assert _tree(tmp_path) == before, f"new files: {sorted(_tree(tmp_path) - before)}"
