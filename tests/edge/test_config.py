from dataclasses import dataclass, field

import pytest

from edge.config import ConfigError, cfg, check_fields, load_config


@dataclass
class Inner:
    gain: float = cfg(1.0, "gain", range=(0.0, 10.0))

    def __post_init__(self):
        check_fields(self)


@dataclass
class Outer:
    rate_hz: float = cfg(20.0, "control rate", range=(1.0, 1000.0))
    mode: str = cfg("replace", "seam", choices=("replace", "weighted"))
    steps: int = cfg(10, "steps", range=(1, 100))
    inner: Inner = field(default_factory=Inner)

    def __post_init__(self):
        check_fields(self)


def test_yaml_and_overrides(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("rate_hz: 50\ninner:\n  gain: 2\n")
    c = load_config(Outer, p, ["steps=3", "inner.gain=4.5"])
    assert (c.rate_hz, c.steps, c.inner.gain, c.mode) == (50.0, 3, 4.5, "replace")
    # YAML 1.1 reads exponents without a dot ("3e-1") as strings; a float field still accepts them
    assert load_config(Outer, None, ["inner.gain=3e-1", "rate_hz=1E2"]).inner.gain == 0.3
    with pytest.raises(ConfigError, match="expected a number"):
        load_config(Outer, None, ["inner.gain=fast"])


@pytest.mark.parametrize("override, words", [
    (["rate_hz=5000"], ["rate_hz", "5000", "[1.0, 1000.0]"]),
    (["mode=blend"], ["mode", "blend", "replace"]),
    (["steps=2.5"], ["steps", "2.5", "integer"]),
    (["ratee_hz=5"], ["unknown key", "ratee_hz", "rate_hz"]),
    (["inner.gain=-1"], ["gain", "-1", "[0.0, 10.0]"]),
    (["inner.gainz=1"], ["unknown key", "inner.gainz"]),
    (["steps"], ["key=value"]),
])
def test_bad_values_name_key_value_and_range(override, words):
    with pytest.raises(ConfigError) as err:
        load_config(Outer, None, override)
    for w in words:
        assert w in str(err.value)


def test_missing_and_invalid_yaml_files(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(Outer, tmp_path / "nope.yaml")
    with pytest.raises(ConfigError, match="is a directory"):
        load_config(Outer, tmp_path)
    bad = tmp_path / "bad.yaml"
    bad.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_config(Outer, bad)


@dataclass
class Texts:
    cpus: str = cfg("", "a CPU list")

    def __post_init__(self):
        check_fields(self)


def test_a_string_field_takes_the_text_of_a_number_and_errors_say_where(tmp_path):
    """--set cpus=0 and YAML ``cpus: 0`` read 0 as a number; a str field keeps its text."""
    assert load_config(Texts, None, ["cpus=0"]).cpus == "0"
    p = tmp_path / "t.yaml"
    p.write_text("cpus: 300\n")
    assert load_config(Texts, p).cpus == "300"
    with pytest.raises(ConfigError, match="expected a string"):
        load_config(Texts, None, ["cpus=true"])
    with pytest.raises(ConfigError, match=r"\(from steps=0 on the command line\)"):
        load_config(Outer, None, ["steps=0"])
    outer = tmp_path / "o.yaml"
    outer.write_text("steps: 3\n")
    with pytest.raises(ConfigError, match=r"\(from steps=0 on the command line\)"):  # the override that set it
        load_config(Outer, outer, ["steps=0"])
    outer.write_text("steps: 0\n")
    with pytest.raises(ConfigError, match=r"or the --set overrides\)"):  # another key overridden: either source
        load_config(Outer, outer, ["rate_hz=30"])


def test_a_ranged_number_given_as_text_is_refused_by_name():
    from drivers.bridge_arm import BridgeArmConfig

    with pytest.raises(ConfigError, match=r"baud='fast' is not a number \(allowed 1200\.\.20000000\)"):
        BridgeArmConfig(port="loop://", baud="fast")
    import numpy as np

    assert BridgeArmConfig(port="loop://", baud=np.int64(115200)).baud == 115200  # numpy numbers are numbers
