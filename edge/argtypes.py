"""argparse ``type=`` checkers for the project's scripts and benchmarks.

A bad value ends in argparse's one-line error naming the flag and the value, with exit status 2,
before anything runs::

    ap.add_argument("--episodes", type=whole(1), default=100)
    # --episodes 0  ->  error: argument --episodes: 0: must be a whole number >= 1
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn


class BadArgument(SystemExit):
    """A bad command-line value found after parsing: exit status 2 (argparse's); ``str()`` is the message."""

    def __init__(self, message: str) -> None:
        super().__init__(2)
        self.message = message

    def __str__(self) -> str:
        return self.message


def fail(message: str) -> NoReturn:
    """End a script on a bad argument found after parsing: ``error: MESSAGE`` on stderr, exit status 2.
    The message names the flag and the value, and what to do."""
    print(f"error: {message}", file=sys.stderr)
    raise BadArgument(message)


def read_json_dict(path: str | Path, flag: str, what: str, hint: str) -> dict:
    """The JSON object in ``path``, given by ``flag``; anything else (no such file, not JSON, not an object)
    ends the script through :func:`fail`: ``FLAG PATH: not WHAT (why); HINT``."""
    import json

    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        fail(f"{flag} {path}: no such file; {hint}")
    except IsADirectoryError:
        fail(f"{flag} {path}: a directory, not {what}; {hint}")
    except (OSError, UnicodeDecodeError, ValueError) as err:
        fail(f"{flag} {path}: not {what} (not readable JSON: {err}); {hint}")
    if not isinstance(data, dict):
        fail(f"{flag} {path}: not {what} (its JSON is a {type(data).__name__}, not an object); {hint}")
    return data


def check_vla_checkpoint(path: str, verify: bool, flag: str = "--checkpoint") -> None:
    """End the script through :func:`fail` unless ``path`` is a VLA checkpoint (a directory with model.pt, or
    the file) that matches its manifest (when ``verify``): checked before anything is measured."""
    from edge.errors import EdgeError
    from edge.vla.checkpoint import resolve

    try:
        ckpt = resolve(path)
        if verify:
            from edge.vla.verify import verify_checkpoint

            verify_checkpoint(ckpt)
    except (FileNotFoundError, EdgeError) as err:
        fail(f"{flag}: {err}" if str(path) in str(err) else f"{flag} {path}: {err}")


def _bounds(lo: float | None, hi: float | None, lo_open: bool = False) -> str:
    if lo is not None and hi is not None:
        return f"in {'(' if lo_open else '['}{lo}, {hi}]"
    if lo is not None:
        return f"{'>' if lo_open else '>='} {lo}"
    return f"<= {hi}"


def _check(value: float, text: str, kind: str, lo: float | None, hi: float | None, lo_open: bool) -> None:
    low = lo is not None and (value <= lo if lo_open else value < lo)
    if low or (hi is not None and value > hi):
        raise argparse.ArgumentTypeError(f"{text}: must be {kind} {_bounds(lo, hi, lo_open)}")


def whole(lo: int | None = None, hi: int | None = None) -> Callable[[str], int]:
    """A whole number within ``[lo, hi]`` (either bound may be None)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text}: not a whole number") from None
        _check(value, text, "a whole number", lo, hi, False)
        return value

    parse.__name__ = "whole number"
    return parse


def number(lo: float | None = None, hi: float | None = None, *, lo_open: bool = False) -> Callable[[str], float]:
    """A finite number within ``[lo, hi]`` (``(lo, hi]`` with ``lo_open``; either bound may be None)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text}: not a number") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text}: must be finite")
        _check(value, text, "a number", lo, hi, lo_open)
        return value

    parse.__name__ = "number"
    return parse


def _listed(one: Callable[[str], float], what: str, example: str) -> Callable[[str], list]:
    def parse(text: str) -> list:
        parts = [p.strip() for p in text.split(",")]
        if not text.strip() or any(not p for p in parts):
            raise argparse.ArgumentTypeError(f"{text!r}: give a comma-separated list of {what}, e.g. {example}")
        return [one(p) for p in parts]

    parse.__name__ = f"list of {what}"
    return parse


def whole_list(lo: int | None = None, hi: int | None = None) -> Callable[[str], list[int]]:
    """A comma-separated, non-empty list of whole numbers, each within ``[lo, hi]``."""
    return _listed(whole(lo, hi), "whole numbers", "1,2,4")


def number_list(lo: float | None = None, hi: float | None = None, *, lo_open: bool = False) -> Callable[[str], list[float]]:
    """A comma-separated, non-empty list of finite numbers, each within the bounds of :func:`number`."""
    return _listed(number(lo, hi, lo_open=lo_open), "numbers", "0,20,50")


def existing(kind: str = "path") -> Callable[[str], str]:
    """A path that exists: ``kind`` "file", "dir" or "path" (either)."""
    if kind not in ("file", "dir", "path"):
        raise ValueError(f"existing(kind={kind!r}): give 'file', 'dir' or 'path'")

    def parse(text: str) -> str:
        p = Path(text)
        ok = p.is_file() if kind == "file" else p.is_dir() if kind == "dir" else p.exists()
        if not ok:
            what = {"file": "no such file", "dir": "no such directory", "path": "no such file or directory"}[kind]
            raise argparse.ArgumentTypeError(f"{text}: {what}")
        return text

    parse.__name__ = kind
    return parse


def writable_file(text: str) -> str:
    """An ``--out`` path a result file can be written to: not a directory; an existing file writable,
    or a new one's nearest existing folder (checked when parsed, before the work; creates nothing)."""
    from edge.writable import check_writable_file
    from edge.errors import EdgeError

    if not text.strip():
        raise argparse.ArgumentTypeError(f"{text!r}: give a file path, e.g. results.json")
    try:
        check_writable_file(text)
    except EdgeError as err:  # argparse names the flag: "argument --out: PATH: ..."
        raise argparse.ArgumentTypeError(str(err).removeprefix("--out ")) from None
    return text


def writable_file_or_none(text: str) -> str:
    """:func:`writable_file`, or "" (no file asked for)."""
    return writable_file(text) if text else text


def writable_path(text: str) -> Path:
    """:func:`writable_file`, as a ``Path``."""
    return Path(writable_file(text))


def writable_dir(text: str) -> str:
    """An ``--out`` directory that exists or can be made, writable (checked when parsed; creates nothing)."""
    from edge.writable import check_writable_dir
    from edge.errors import EdgeError

    try:
        check_writable_dir(text)
    except EdgeError as err:
        raise argparse.ArgumentTypeError(str(err).removeprefix("--out ")) from None
    return text


writable_file.__name__ = writable_path.__name__ = writable_file_or_none.__name__ = "file path"
writable_dir.__name__ = "directory"
