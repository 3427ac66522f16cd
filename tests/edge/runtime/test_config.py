"""RuntimeConfig: nested sections, short names, YAML round trip, errors, old flat run records."""

import dataclasses

import pytest
import yaml

from edge.config import ConfigError, to_dict
from edge.resources import config_dir
from edge.runtime.config import (
    SHORTCUTS,
    RuntimeConfig,
    apply_settings,
    config_from_meta,
    dump_yaml,
    flag_of,
    load_runtime_config,
)


def test_short_names_and_dotted_paths_reach_the_same_fields():
    a = RuntimeConfig.of(num_steps=2, execute=16, seam="rtc", backend="torch", clock="real", inference="process")
    b = RuntimeConfig.of(**{"scheduler.fixed.num_steps": 2, "scheduler.fixed.execute": 16, "queue.seam": "rtc",
                            "backend.name": "torch", "clock.kind": "real", "worker.mode": "process"})
    assert a == b
    assert (a.num_steps, a.execute, a.queue.seam, a.backend.name) == (2, 16, "rtc", "torch")


def test_num_steps_and_execute_follow_the_scheduler_kind():
    c = RuntimeConfig.of(scheduler="dvac", num_steps=4, execute=12)
    assert (c.scheduler.dvac.num_steps, c.scheduler.dvac.max_execute) == (4, 12)
    assert (c.scheduler.fixed.num_steps, c.scheduler.fixed.execute) == (10, 8)  # untouched
    assert (c.num_steps, c.execute) == (4, 12)
    assert c.short()["num_steps"] == 4 and c.short()["scheduler"] == "dvac"
    # the kind given after the short names still decides where they go
    assert RuntimeConfig.of(num_steps=4, scheduler="dvac").scheduler.dvac.num_steps == 4


def test_every_short_name_addresses_a_field():
    c = RuntimeConfig()
    short = c.short()
    assert set(short) == set(SHORTCUTS)
    assert RuntimeConfig.of(**short) == c  # the flat view rebuilds the config


def test_defaults_are_the_runtime_defaults():
    c = RuntimeConfig()
    assert c.backend.name == "onnxruntime" and c.backend.threads == 1
    assert c.queue.seam == "replace" and c.worker.noise_temperature == 0.5
    assert c.scheduler.dvac.max_execute == 8 and c.run.seed == 100000


def test_the_shipped_default_yaml_holds_every_runtime_setting_at_its_default():
    from edge.config import to_dict

    def flat(d, prefix=""):
        out = {}
        for k, v in d.items():
            out.update(flat(v, f"{prefix}{k}.") if isinstance(v, dict) and v else {f"{prefix}{k}": v})
        return out

    want = flat(to_dict(RuntimeConfig()))
    want.pop("policy.checkpoint")  # left out: the shipped one
    assert flat(yaml.safe_load((config_dir("run") / "default.yaml").read_text())) == want
    assert load_runtime_config(None, config_dir("run") / "default.yaml") == RuntimeConfig()


def test_yaml_round_trip_and_the_shipped_presets(tmp_path):
    base = RuntimeConfig.of(num_steps=2)
    cfg = load_runtime_config(base, config_dir("run") / "default.yaml", ["execute=16"])
    assert cfg.num_steps == 10 and cfg.execute == 16  # the file's value, then --set
    p = tmp_path / "s.yaml"
    p.write_text(dump_yaml(cfg))
    assert load_runtime_config(None, p) == cfg
    assert yaml.safe_load(p.read_text())["scheduler"]["fixed"]["execute"] == 16
    dvac = load_runtime_config(None, config_dir("run") / "dvac.yaml")
    assert dvac.scheduler.kind == "dvac" and dvac.scheduler.dvac.num_steps == 4 and dvac.queue.seam == "weighted"
    assert dvac.scheduler.dvac.last_steps == 3  # a partial section keeps the other defaults


def test_a_flat_yaml_of_short_names_still_loads(tmp_path):
    p = tmp_path / "flat.yaml"
    p.write_text("num_steps: 3\nseam: weighted\nscheduler: fixed\nepisodes: 7\n")
    c = load_runtime_config(None, p)
    assert (c.num_steps, c.queue.seam, c.run.episodes) == (3, "weighted", 7)


@pytest.mark.parametrize("override,msg", [
    ("bogus=1", "unknown key bogus"),
    ("scheduler.nope.x=1", "unknown key scheduler.nope"),
    ("scheduler.kind.x=1", "scheduler.kind is a setting, not a section"),
    ("scheduler.dvac.kappa=-1", r"scheduler\.dvac\.kappa=-1\.0 is out of range"),
    ("scheduler.dvac.min_execute=9", "min_execute=9 > max_execute=8"),
    ("safety.stop_s=0.1", "stop_s=0.1 must be >= stale_s"),
    ("backend.name=cuda", "name='cuda' is not allowed"),
    ("seam=zip", "seam='zip' is not allowed"),
    ("scene.render_mesh_cell_m=0.0005", r"scene\.render_mesh_cell_m=0\.0005 is out of range"),
    ("scene.render_mesh_cell_m=0.1", r"scene\.render_mesh_cell_m=0\.1 is out of range"),
])
def test_bad_settings_name_the_key_and_where_they_came_from(override, msg):
    with pytest.raises(ConfigError, match=msg) as err:
        load_runtime_config(None, None, [override])
    assert "--set" in str(err.value)


def test_simplified_render_meshes_are_refused_for_pybullet():
    with pytest.raises(ConfigError, match=r"scene\.render_mesh_cell_m=0\.01 applies to sim 'mujoco' only") as err:
        load_runtime_config(None, None, ["sim=pybullet", "scene.render_mesh_cell_m=0.01"])
    assert "--set" in str(err.value)


def test_the_safety_and_queue_sections_reach_the_loop():
    from edge.runtime.session import build_runtime

    cfg = RuntimeConfig.of(policy="tests.fakes:hold_policy", episodes=1, max_steps=4, record_ticks=False,
                           video_episodes=0, num_steps=1, execute=8,
                           **{"safety.max_ee_step_m": 0.01, "queue.blend_new": 0.25})
    rt = build_runtime(cfg, None)
    try:
        assert rt.loop.safety.config.max_ee_step_m == 0.01
        assert rt.loop.queue_config.blend_new == 0.25
    finally:
        rt.close()


def test_old_flat_run_records_read_as_configs():
    old = {"session": {"num_steps": 2, "execute": 8, "seam": "rtc", "episodes": 5, "scheduler": "fixed"}}
    c = config_from_meta(old)
    assert (c.num_steps, c.queue.seam, c.run.episodes) == (2, "rtc", 5)
    new = {"session": c.short(), "config": to_dict(c)}
    assert config_from_meta(new) == c


def test_flags_named_in_messages():
    assert flag_of("scheduler.fixed.num_steps") == "--num-steps"
    assert flag_of("loop.execution") == "--query-mode"
    assert flag_of("scheduler.dvac.kappa") == "--set scheduler.dvac.kappa=..."
    # short names with no edge run flag are named as --set keys (edge run --help lists every flag)
    for path in ("loop.cpus", "worker.cpus", "scheduler.eqrl.noise", "scene.max_steps", "policy.verify"):
        assert flag_of(path) == f"--set {path}=..."


def test_options_are_unread_unless_a_users_factory_takes_them():
    from dataclasses import replace

    from edge.runtime.config import unread_settings

    given = apply_settings(RuntimeConfig(), [("scheduler.options", {"gain": 2}), ("policy.options", {"k": 1})])
    assert [u[0] for u in unread_settings(given)] == ["scheduler.options", "policy.options"]
    assert "this run's scheduler is fixed (its settings: scheduler.fixed.*)" in unread_settings(given)[0][1]
    custom = replace(given, scheduler=replace(given.scheduler, kind="my_sched:make"),
                     policy=replace(given.policy, name="my_pol:make"))
    assert unread_settings(custom) == []


def test_options_sections_pass_through_for_plugins():
    c = apply_settings(RuntimeConfig(), [("scheduler.options", {"gain": 2, "mode": {"a": 1}})])
    assert c.scheduler.options == {"gain": 2, "mode": {"a": 1}}
    assert dataclasses.asdict(c)["scheduler"]["options"]["mode"] == {"a": 1}


def test_loop_os_settings_reach_the_control_loop():
    """loop.timer_slack_ns, loop.gil_switch_interval_s and loop.cpus of the runtime config are the
    ControlLoop's, worker.torch_threads its worker's."""
    from edge.clock import RealClock, VirtualClock
    from edge.control_loop import LoopConfig
    from edge.runtime.config import config_from_meta, to_dict
    from edge.runtime.wiring import wire_loop
    from tests.fakes import FakeDriver, FakeObserver, joint_spec, ramp_for

    cfg = RuntimeConfig.of(**{"loop.timer_slack_ns": 50_000, "loop.gil_switch_interval_s": 0.0})
    spec, clock = joint_spec(), VirtualClock()
    loop = wire_loop(spec, clock, FakeDriver(clock, spec), FakeObserver(), ramp_for(spec), None, None, cfg)
    assert loop.config.timer_slack_ns == 50_000 and loop.config.cpus == ""
    assert loop.config.gil_switch_interval_s == 0.0
    assert RuntimeConfig().loop.timer_slack_ns == 1
    assert RuntimeConfig().loop.gil_switch_interval_s == LoopConfig().gil_switch_interval_s == 0.0005
    with pytest.raises(ConfigError, match="timer_slack_ns"):
        RuntimeConfig.of(**{"loop.timer_slack_ns": -1})
    with pytest.raises(ConfigError, match="gil_switch_interval_s"):
        RuntimeConfig.of(**{"loop.gil_switch_interval_s": 0.5})
    nested = to_dict(RuntimeConfig())
    del nested["loop"]["gil_switch_interval_s"]  # runs recorded before the key: the loop used 0.5 ms
    del nested["worker"]["torch_threads"]  # ... and the worker its default threads
    old = config_from_meta({"config": nested})
    assert old.loop.gil_switch_interval_s == 0.0005 and old.worker.torch_threads == 0
    cfg = RuntimeConfig.of(**{"worker.torch_threads": 1, "worker.start_timeout_s": 30.0, "clock": "real",
                              "inference": "thread"})
    loop = wire_loop(spec, RealClock(), FakeDriver(clock, spec), FakeObserver(), ramp_for(spec), None, None, cfg)
    try:
        assert loop.worker.config.torch_threads == 1 and loop.worker._torch_threads == 1
        assert loop.worker.config.start_timeout_s == 30.0
    finally:
        loop.worker.close()
    with pytest.raises(ConfigError, match="torch_threads"):
        RuntimeConfig.of(**{"worker.torch_threads": -1})


def test_runs_recorded_before_plan_backend_resume_on_torch():
    from edge.runtime.config import RuntimeConfig, config_from_meta, to_dict

    nested = to_dict(RuntimeConfig.of(policy="comet", task="push"))
    del nested["policy"]["comet"]["plan_backend"]  # meta.json written before the key existed
    assert config_from_meta({"config": nested}).policy.comet.plan_backend == "torch"
    assert config_from_meta({"session": {"policy": "comet", "task": "push"}}).policy.comet.plan_backend == "torch"
    now = to_dict(RuntimeConfig.of(policy="comet", task="push"))  # recorded: kept as it was
    assert config_from_meta({"config": now}).policy.comet.plan_backend == "onnxruntime"


def test_runs_recorded_before_the_planner_deadline_read_back_without_one():
    from edge.runtime.config import config_from_meta, to_dict

    nested = to_dict(RuntimeConfig.of(policy="comet", plan_deadline_ms=40.0))
    assert config_from_meta({"config": nested}).policy.comet.plan_deadline_ms == 40.0
    del nested["policy"]["comet"]["plan_deadline_ms"]  # recorded before the key: the search had no deadline
    assert config_from_meta({"config": nested}).policy.comet.plan_deadline_ms == 0.0
    assert config_from_meta({"session": {"policy": "comet"}}).policy.comet.plan_deadline_ms == 0.0


def test_the_planners_worker_takes_its_threads_unless_worker_torch_threads_is_set():
    from edge.runtime.config import apply_settings
    from edge.runtime.wiring import _plan_threads

    comet = RuntimeConfig.of(policy="comet", task="reach")
    assert _plan_threads(comet) == 1 and _plan_threads(apply_settings(comet, [("policy.comet.plan_threads", 3)])) == 3
    assert _plan_threads(RuntimeConfig.of(policy="vla")) == 0  # the VLA's worker keeps its own default


def test_runs_recorded_before_plan_threads_read_back_with_torchs_own_threads():
    from edge.runtime.config import config_from_meta, to_dict

    nested = to_dict(RuntimeConfig.of(policy="comet"))
    assert RuntimeConfig().policy.comet.plan_threads == 1  # edge run's planner: one torch thread, as the VLA's backend
    del nested["policy"]["comet"]["plan_threads"]  # recorded before the key: torch kept its own count
    assert config_from_meta({"config": nested}).policy.comet.plan_threads == 0
    assert config_from_meta({"session": {"policy": "comet"}}).policy.comet.plan_threads == 0


def test_every_flag_named_in_messages_is_an_edge_run_flag():
    from edge.cli import build_parser
    from edge.runtime.config import SHORTCUTS, shortcut_path

    parser = build_parser()
    run = next(a for a in parser._actions if a.choices and "run" in a.choices).choices["run"]
    flags = {o for a in run._actions for o in a.option_strings}
    named = {flag_of(shortcut_path(n, kind)) for n in SHORTCUTS for kind in ("fixed", "dvac")}
    assert {f for f in named if not f.startswith("--set ")} <= flags
