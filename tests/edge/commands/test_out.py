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
