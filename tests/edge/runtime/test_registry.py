import pytest

from edge.errors import EdgeError
from edge.runtime.config import RuntimeConfig
from edge.runtime.registry import SCHEDULERS, Registry


def test_builtin_schedulers_resolve_lazily():
    fixed = SCHEDULERS.resolve("fixed")(RuntimeConfig.of(num_steps=3, execute=5))
    assert (fixed.num_steps, fixed.execute) == (3, 5)
    assert {"fixed", "dvac", "eqrl"} <= set(SCHEDULERS.names())


def test_user_factory_by_module_path():
    factory = SCHEDULERS.resolve("edge.runtime.factories:fixed_scheduler")
    assert factory(RuntimeConfig.of(num_steps=2, execute=8)).execute == 8


@pytest.mark.parametrize("name,msg", [("nope", "unknown scheduler 'nope'"),
                                      ("no_such_mod:f", "cannot import module 'no_such_mod'"),
                                      ("edge.stats:not_there", "has no callable 'not_there'")])
def test_bad_names_give_clear_errors(name, msg):
    with pytest.raises(EdgeError, match=msg):
        SCHEDULERS.resolve(name)


def test_register_needs_module_colon_factory():
    r = Registry("thing", {})
    with pytest.raises(EdgeError, match="module:factory"):
        r.register("x", "justamodule")


def test_a_users_own_policy_runs_through_the_runtime():
    from edge.runtime.session import run_session

    cfg = RuntimeConfig.of(policy="tests.fakes:hold_policy", episodes=1, max_steps=6, record_ticks=False,
                        video_episodes=0, num_steps=1, execute=8)
    res = run_session(cfg, None, progress=False)
    ep = res.episodes[0]
    assert ep["steps"] == 6 and not ep["success"] and ep["queries"] >= 1


@pytest.mark.parametrize("flag,name,msg", [
    ("scheduler", "tests.fakes:FakeObserver", "cannot be called with (config, policy)"),  # takes other arguments
    ("policy", "tests.fakes:campaign_square", "cannot be called with (config, robot)"),  # a function of one job
    ("policy", "tests.fakes:spec_only", "returned a _HoldSpec without spec, chunk_len, action_dim, encode, sample"),
])
def test_a_users_factory_that_does_not_build_the_right_thing_is_named(flag, name, msg):
    from edge.runtime.session import run_session

    cfg = RuntimeConfig.of(**{flag: name}, episodes=1, max_steps=2, record_ticks=False, video_episodes=0)
    import re

    with pytest.raises(EdgeError, match=re.escape(f"--{flag} {name}: {msg}")):
        run_session(cfg, None, progress=False)


def test_what_a_users_factory_raises_is_raised_as_it_is():
    from edge.runtime.session import run_session

    cfg = RuntimeConfig.of(policy="tests.fakes:broken_factory", episodes=1, max_steps=2, record_ticks=False,
                           video_episodes=0)
    with pytest.raises(AttributeError, match="the user's own bug"):
        run_session(cfg, None, progress=False)


def test_a_users_factory_is_told_of_the_options_it_never_read(tmp_path, capsys):
    import dataclasses
    import json

    from edge.runtime.config import apply_settings
    from edge.runtime.session import ReadOptions, run_session

    cfg = RuntimeConfig.of(scheduler="tests.fakes:options_scheduler", episodes=1, max_steps=4, video_episodes=0)
    cfg = apply_settings(cfg, [("scheduler.options", {"k": 1, "kk": 3})])  # "kk": a misspelt option
    res = run_session(cfg, tmp_path / "run", progress=False)
    err = capsys.readouterr().err
    assert "note: scheduler.options.kk: tests.fakes:options_scheduler never read it" in err
    assert "options.k:" not in err
    events = [json.loads(x) for x in (tmp_path / "run" / "events.jsonl").read_text().splitlines()]
    assert [e["detail"] for e in events if e["kind"] == "option_unread"] == [
        "scheduler.options.kk: tests.fakes:options_scheduler never read it (a misspelt option, or one it does not have)"]
    assert json.loads((tmp_path / "run" / "meta.json").read_text())["config"]["scheduler"]["options"] == {"k": 1, "kk": 3}
    assert res.summary["episodes"] == 1
    every = dataclasses.replace(cfg, scheduler=dataclasses.replace(cfg.scheduler, options={"k": 1, "kk": 3}))
    opts = ReadOptions(every.scheduler.options)
    assert opts.unread() == ["k", "kk"] and (dict(**opts) or True) and opts.unread() == []  # unpacking reads all
