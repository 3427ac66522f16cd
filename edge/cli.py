"""The ``edge`` command line. This is the one place where concrete classes are composed.

Each subcommand lives in ``edge/commands/<name>.py`` and exposes ``register(subparsers)``; modules
are imported here (cheap: argparse only) and import heavy packages inside their handlers, so
``edge --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys

from edge import __version__
from edge.errors import EdgeError

# Order = order in `edge --help`; each module defines register(subparsers).
COMMAND_MODULES = (
    "edge.commands.run",
    "edge.commands.hil",
    "edge.commands.profile",
    "edge.commands.report",
    "edge.commands.data",
    "edge.commands.expert",
    "edge.commands.train",
    "edge.commands.export",
    "edge.commands.doctor",
)


class _Formatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Examples kept as written; ``(default: X)`` appended to an option's help unless the help
    already says what the default is, or there is nothing to show (a flag, a required option, an
    empty or unset default: then the help says what happens without it)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if (re.search(r"\bdefault", text) or action.nargs == 0 or action.required
                or action.default in (None, "", [], argparse.SUPPRESS)):
            return text
        return text + " (default: %(default)s)"


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
        importlib.import_module(name).register(sub)
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


class DeprecatedAlias(argparse.Action):
    """An old spelling of an option (or a positional): stores into the canonical option's ``dest``
    and prints one line, ``warning: OLD is deprecated; use NEW``, to stderr when it is used."""

    def __init__(self, option_strings, dest, use: str, old: str | None = None, **kwargs) -> None:
        self.use, self.old = use, old
        self.given: tuple[str, object] | None = None
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        print(f"warning: {self.old or option_string} is deprecated; use {self.use}", file=sys.stderr)
        setattr(namespace, self.dest, values)
        self.given = (self.old or option_string, values)  # main() refuses it beside the new spelling


def add_deprecated_alias(container, old: str, canonical: argparse.Action) -> argparse.Action:
    """Accept ``old`` as a deprecated spelling of the option ``canonical`` (same dest, type, choices,
    metavar; the canonical default stands). Shown in ``--help`` as ``deprecated: use NEW``. For
    options that take one value (not flags such as ``store_true``)."""
    new = max(canonical.option_strings, key=len)
    return container.add_argument(old, action=DeprecatedAlias, use=new, dest=canonical.dest,
                                  type=canonical.type, choices=canonical.choices,
                                  metavar=canonical.metavar or (None if canonical.choices
                                                                else canonical.dest.upper()),
                                  default=argparse.SUPPRESS,
                                  help=f"deprecated: use {new}")


def _command_parser(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The innermost subcommand parser ``args`` went through (edge train vla -> its parser)."""
    while True:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        name = getattr(args, subs[0].dest, None) if subs else None
        if name not in (subs[0].choices if subs else {}):
            return parser
        parser = subs[0].choices[name]


def _stdout_broken() -> bool:
    """Whether our stdout is a pipe whose reader has gone (its write end reports an error)."""
    import select

    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(ev & select.POLLERR for _, ev in poller.poll(0))
    except (OSError, ValueError, AttributeError):
        return False


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # named by the (sub)command's own usage, not the top level's
        _command_parser(parser, args).error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        command = _command_parser(parser, args)
        actions = command._actions
    except AttributeError:  # a stand-in parser (tests)
        actions = []
    given = list(sys.argv[1:] if argv is None else argv)
    for a in actions:  # a deprecated spelling and the new one: which value wins would depend on their order
        new = a.use.split()[0] if isinstance(a, DeprecatedAlias) else ""
        if new and a.given is not None and any(x == new or x.startswith(new + "=") for x in given):
            command.error(f"{a.given[0]} {a.given[1]} and {new} both given: give {a.use} once")
    if not getattr(args, "func", None):
        parser.print_help()
        return 0 if args.command is None else 2
    # the command line as given (for records), and the options set to something other than their default
    # (a command may say what overrides them)
    args.argv = given
    args.non_default = {a.dest for a in actions  # (a deprecated alias shares its option's dest, not its default)
                        if a.dest not in ("help", "func") and not isinstance(a, DeprecatedAlias)
                        and getattr(args, a.dest, a.default) != a.default}
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        if not _stdout_broken():  # a pipe of ours (e.g. to a worker process): a real error
            raise
        # the reader of our output went away (edge data info DIR | head -1): stop quietly, as a
        # program killed by SIGPIPE would (exit 141), without a traceback at Python's exit flush
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except (EdgeError, FileNotFoundError, PermissionError, NotADirectoryError, IsADirectoryError) as err:
        if os.environ.get("EDGE_DEBUG"):
            raise
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
