"""edge/commands/_out.py: output paths checked before the work that writes them."""

import pytest

from edge.commands._out import check_writable_dir, check_writable_file
from edge.errors import EdgeError


def test_a_result_file_path_is_checked_before_the_work(tmp_path):
    check_writable_file(tmp_path / "new" / "deeper" / "r.json")  # folders that can be made: fine
    assert not (tmp_path / "new").exists()  # and nothing was created
    with pytest.raises(EdgeError, match="is a directory"):
        check_writable_file(tmp_path)
    (tmp_path / "f").write_text("x")
    with pytest.raises(EdgeError, match=r"--out .*f/r\.json: its folder .*f: exists and is not a directory"):
        check_writable_file(tmp_path / "f" / "r.json")
    with pytest.raises(EdgeError, match="--runs-dir .*exists and is not a directory"):
        check_writable_dir(tmp_path / "f", flag="--runs-dir")


def test_an_existing_file_is_written_in_place_so_its_folder_is_not_probed(tmp_path, monkeypatch):
    import edge.writable as out_mod
    from edge.errors import EdgeError

    f = tmp_path / "results.json"
    f.write_text("{}")

    def folder_not_writable(p, flag="--out"):
        raise EdgeError(f"{flag} {p}: not writable")

    monkeypatch.setattr(out_mod, "check_writable_dir", folder_not_writable)
    out_mod.check_writable_file(f)  # e.g. a results file the user may write, in a folder they may not
    with pytest.raises(EdgeError, match="its folder"):  # a writer that renames a temp file over it needs the folder
        out_mod.check_writable_file(f, replace=True)
    with pytest.raises(EdgeError, match="its folder"):  # a new file too
        out_mod.check_writable_file(tmp_path / "new.json")
