import argparse

import pytest

from edge.argtypes import existing, number, number_list, whole, whole_list


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="bench")
    ap.add_argument("--episodes", type=whole(1), default=3)
    ap.add_argument("--rate", type=number(0, lo_open=True), default=20.0)
    ap.add_argument("--frac", type=number(0, 1), default=0.5)
    ap.add_argument("--ks", type=whole_list(1, 100), default=[1])
    ap.add_argument("--lat", type=number_list(0), default=[0.0])
    ap.add_argument("--data", type=existing("dir"))
    return ap


def test_good_values_parse(tmp_path):
    a = _parser().parse_args(["--episodes", "5", "--rate", "0.5", "--frac", "1", "--ks", "1, 2,4",
                              "--lat", "0,12.5", "--data", str(tmp_path)])
    assert (a.episodes, a.rate, a.frac, a.ks, a.lat, a.data) == (5, 0.5, 1.0, [1, 2, 4], [0.0, 12.5], str(tmp_path))


@pytest.mark.parametrize("argv, said", [
    (["--episodes", "0"], "argument --episodes: 0: must be a whole number >= 1"),
    (["--episodes", "2.5"], "argument --episodes: 2.5: not a whole number"),
    (["--rate", "0"], "argument --rate: 0: must be a number > 0"),
    (["--rate", "nan"], "argument --rate: nan: must be finite"),
    (["--rate", "fast"], "argument --rate: fast: not a number"),
    (["--frac", "1.5"], "argument --frac: 1.5: must be a number in [0, 1]"),
    (["--ks", "1,x"], "argument --ks: x: not a whole number"),
    (["--ks", "1,,2"], "argument --ks: '1,,2': give a comma-separated list"),
    (["--ks", ""], "argument --ks: '': give a comma-separated list"),
    (["--ks", "0,2"], "argument --ks: 0: must be a whole number in [1, 100]"),
    (["--lat", "-5"], "argument --lat: -5: must be a number >= 0"),
    (["--data", "/no/such/dir"], "argument --data: /no/such/dir: no such directory"),
])
def test_bad_values_end_in_one_line_naming_the_flag_and_value(argv, said, capsys):
    with pytest.raises(SystemExit) as exit_:
        _parser().parse_args(argv)
    assert exit_.value.code == 2
    assert said in capsys.readouterr().err


def test_existing_kinds(tmp_path):
    f = tmp_path / "a.json"
    f.write_text("{}")
    assert existing("file")(str(f)) == str(f)
    with pytest.raises(argparse.ArgumentTypeError, match="no such file"):
        existing("file")(str(tmp_path))
    assert existing("path")(str(tmp_path)) == str(tmp_path)
    with pytest.raises(ValueError):
        existing("folder")


def test_out_paths_are_checked_when_parsed_and_nothing_is_made(tmp_path, capsys):
    from edge.argtypes import writable_dir, writable_file, writable_file_or_none, writable_path

    ap = argparse.ArgumentParser(prog="bench")
    ap.add_argument("--out", type=writable_file, default=str(tmp_path / "new" / "deeper" / "r.json"))
    ap.add_argument("--runs", type=writable_dir)
    ap.add_argument("--p", type=writable_path)
    a = ap.parse_args(["--runs", str(tmp_path / "runs"), "--p", str(tmp_path / "p.json")])
    assert a.out == str(tmp_path / "new" / "deeper" / "r.json") and a.p == tmp_path / "p.json"
    assert list(tmp_path.iterdir()) == []  # checked, nothing created
    with pytest.raises(SystemExit):  # Path("") would be the current directory, found only when written
        ap.parse_args(["--out", ""])
    assert "argument --out: '': give a file path" in capsys.readouterr().err
    opt = argparse.ArgumentParser(prog="pairs")
    opt.add_argument("--out", type=writable_file_or_none, default="")
    assert opt.parse_args([]).out == "" and opt.parse_args(["--out", str(tmp_path / "o.json")]).out
    (tmp_path / "f").write_text("")
    for argv, said in ((["--out", str(tmp_path)], f"argument --out: {tmp_path}: is a directory; give a file path"),
                       (["--out", str(tmp_path / "f" / "r.json")], "its folder"),
                       (["--runs", str(tmp_path / "f")], f"{tmp_path / 'f'}: exists and is not a directory")):
        with pytest.raises(SystemExit) as e:
            ap.parse_args(argv)
        err = capsys.readouterr().err
        assert e.value.code == 2 and said in err, err


def test_read_json_dict_names_the_flag_the_file_and_what_it_is_not(tmp_path, capsys):
    import pytest

    from edge.argtypes import BadArgument, read_json_dict

    good = tmp_path / "r.json"
    good.write_text('{"a": 1}')
    assert read_json_dict(good, "--in", "a result", "rerun it") == {"a": 1}
    for text, said in (("not json", "not a result (not readable JSON"), ("[1]", "its JSON is a list, not an object")):
        good.write_text(text)
        with pytest.raises(BadArgument) as e:
            read_json_dict(good, "--in", "a result", "rerun it")
        assert e.value.code == 2 and str(e.value) == capsys.readouterr().err.strip().removeprefix("error: ")
        assert str(e.value).startswith(f"--in {good}: ") and said in str(e.value) and str(e.value).endswith("; rerun it")
    with pytest.raises(BadArgument, match="no such file; rerun it"):
        read_json_dict(tmp_path / "none.json", "--in", "a result", "rerun it")
    with pytest.raises(BadArgument, match="a directory, not a result"):
        read_json_dict(tmp_path, "--in", "a result", "rerun it")
