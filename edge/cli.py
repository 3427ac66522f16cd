"""The ``edge`` command line. This is the one place where concrete classes are composed.

Each subcommand lives in ``edge/commands/<name>.py`` and exposes ``register(subparsers)``; modules
are imported here (cheap: argparse only) and import heavy packages inside their handlers, so
``edge --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from edge import __version__
from edge.errors import EdgeError

# Order = order in `edge --help`. A module missing here is simply not offered.
COMMAND_MODULES = (
    "edge.commands.run",
    "edge.commands.hil",
    "edge.commands.profile",
    "edge.commands.report",
    "edge.commands.data",
    "edge.commands.expert",
    "edge.commands.train",
    "edge.commands.eval",
    "edge.commands.export",
    "edge.commands.doctor",
)


class _Formatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    pass


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="edge",
        description="Edge robotics runtime for VLA and model-based control.",
        epilog="Run `edge <command> --help` for examples. Set EDGE_DEBUG=1 for tracebacks.",
        formatter_class=_Formatter,
    )
    parser.add_argument("--version", action="version", version=f"edge {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="<command>")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as err:
            if err.name == name:
                continue  # command not built yet
            raise
        module.register(sub)
    return parser


def add_subparser(sub, name: str, help: str, examples: str) -> argparse.ArgumentParser:
    """Uniform subcommand parser: help text plus an ``Examples:`` epilogue."""
    return sub.add_parser(
        name,
        help=help,
        description=help,
        epilog="Examples:\n" + examples.strip("\n"),
        formatter_class=_Formatter,
    )


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0 if args.command is None else 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except (EdgeError, FileNotFoundError, PermissionError, NotADirectoryError, IsADirectoryError) as err:
        if os.environ.get("EDGE_DEBUG"):
            raise
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
