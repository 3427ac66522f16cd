import pytest

from edge.errors import EdgeError
from edge.runtime.registry import SCHEDULERS, Registry
from edge.runtime.session import SessionConfig


def test_builtin_schedulers_resolve_lazily():
    fixed = SCHEDULERS.resolve("fixed")(SessionConfig(num_steps=3, execute=5))
    assert (fixed.num_steps, fixed.execute) == (3, 5)
    assert {"fixed", "dvac", "eqrl"} <= set(SCHEDULERS.names())


def test_user_factory_by_module_path():
    factory = SCHEDULERS.resolve("edge.runtime.factories:fixed_scheduler")
    assert factory(SessionConfig(num_steps=2, execute=8)).execute == 8


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

    cfg = SessionConfig(policy="tests.fakes:hold_policy", episodes=1, max_steps=6, record_ticks=False,
                        video_episodes=0, num_steps=1, execute=8)
    res = run_session(cfg, None, progress=False)
    ep = res.episodes[0]
    assert ep["steps"] == 6 and not ep["success"] and ep["queries"] >= 1


def test_session_config_round_trips_through_yaml(tmp_path):
    import yaml

    from edge.config import layer_config, to_dict
    from edge.resources import config_dir

    base = SessionConfig(num_steps=2)
    cfg = layer_config(base, config_dir("run") / "default.yaml", ["execute=16"])
    assert cfg.num_steps == 10 and cfg.execute == 16  # the file's value, then --set
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(to_dict(cfg)))
    assert layer_config(SessionConfig(), p) == cfg
    with pytest.raises(Exception, match="bogus"):
        layer_config(base, None, ["bogus=1"])
