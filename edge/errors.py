"""User-facing errors: raised for bad input, printed by the CLI without a traceback."""


class EdgeError(Exception):
    """An error the user can fix (bad flag, missing file, unwritable output). The message says how."""


class EpisodeAborted(Exception):
    """Raised by a scheduler or policy whose owner ended the episode (e.g. ``QueryEnv.reset`` or
    ``close`` mid-episode). The loop stops the arm as for any failed query, but logs it as what it
    is, not as an error."""
