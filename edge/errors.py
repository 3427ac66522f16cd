"""User-facing errors: raised for bad input, printed by the CLI without a traceback."""


class EdgeError(Exception):
    """An error the user can fix (bad flag, missing file, unwritable output). The message says how."""
