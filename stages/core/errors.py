"""Errors shared by every stage."""


class M3Error(Exception):
    """An error the user can act on; the CLI prints its message without a traceback."""


class InputError(M3Error):
    """Bad input (a file, a record, a flag value): the message names what and where."""
