"""setuptools ``build_py`` hook (named in pyproject.toml): ship the top-level ``configs/`` in the wheel.

The repository keeps its YAML presets at the top level (``configs/robots``, ``configs/hil``,
``configs/train``), outside any package, where package data cannot reach. This hook adds them to the
``edge`` package's data as ``edge/_configs/...``, so a wheel (and a non-editable install) carries
them; :func:`edge.resources.config_dir` finds the packaged copy, or the checkout's ``configs/``
when running from source (editable installs copy nothing and read the checkout).
"""

from __future__ import annotations

import os
from pathlib import Path

from setuptools.command.build_py import build_py

CONFIGS_SRC = "configs"
CONFIGS_PKG = "edge._configs"
PATTERNS = ("*.yaml", "*.yml")


class BuildPy(build_py):
    def _configs_entry(self) -> tuple[str, str, str, list[str]]:
        src = Path(CONFIGS_SRC)
        names = sorted(p.relative_to(src).as_posix() for pat in PATTERNS for p in src.rglob(pat)
                       if p.is_file())
        if not names:
            raise FileNotFoundError(f"{src.resolve()}: no YAML presets to package (run the build "
                                    "from the repository root of a full checkout)")
        build_dir = os.path.join(self.build_lib, *CONFIGS_PKG.split("."))
        return CONFIGS_PKG, CONFIGS_SRC, build_dir, names

    def _get_data_files(self):
        return [*super()._get_data_files(), self._configs_entry()]

    def get_data_files_without_manifest(self):
        return [*super().get_data_files_without_manifest(), self._configs_entry()]
