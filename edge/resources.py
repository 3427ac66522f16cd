"""Where the shipped YAML presets live, in a source checkout and in an installed wheel.

The repository keeps them at the top level (``configs/robots``, ``configs/hil``, ``configs/train``).
A wheel carries a copy inside the package, ``edge/_configs/`` (written at build time by
``scripts/build_py.py``, the ``build_py`` hook named in ``pyproject.toml``). Code that needs a
shipped preset asks :func:`config_dir` instead of walking up from its own ``__file__``::

    from edge.resources import config_dir
    preset = config_dir("train") / "vla_tiny.yaml"

This module imports nothing from the project.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
PACKAGED_CONFIGS = PACKAGE_DIR / "_configs"        # installed wheel
CHECKOUT_CONFIGS = PACKAGE_DIR.parent / "configs"  # source checkout (editable install, PYTHONPATH=.)


def config_dir(*parts: str) -> Path:
    """The shipped ``configs/`` directory (or a subdirectory of it, e.g. ``config_dir("hil")``).

    Prefers the packaged copy (an installed wheel), else the checkout's top-level ``configs/``
    (recognised by the ``pyproject.toml`` beside it, so an unrelated ``site-packages/configs`` is
    never picked up). If neither exists (a broken install) it returns the packaged path, so the
    caller's "no such file" error names where the file should have been.
    """
    if not PACKAGED_CONFIGS.is_dir() and CHECKOUT_CONFIGS.is_dir() \
            and (PACKAGE_DIR.parent / "pyproject.toml").is_file():
        return CHECKOUT_CONFIGS.joinpath(*parts)
    return PACKAGED_CONFIGS.joinpath(*parts)
