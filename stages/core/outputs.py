"""Is an output writable? Asked before the work, so an hour of it is not lost to a read-only folder.

Why a real probe (a file created and removed in the folder) instead of ``os.access``: ``access``
says yes to root in a folder with mode 0o555, and knows nothing of a folder's ACLs; creating a file
is what the write itself will do. The probe is cheap (one create and one unlink), and the write at the
end still handles its own failure: the folder can change while the work runs.
"""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path
from typing import TypeGuard

from m3cli.stages.core.errors import InputError

#: errors of a folder that cannot take the output (not a full disk: that has its own line)
UNWRITABLE = (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOTDIR, errno.EISDIR, errno.ENOENT)


def nearest_folder(path: Path) -> Path:
    """The folder the output will be created in, or its nearest existing ancestor (the rest of the
    path is made by the writer)."""
    here = Path(os.path.abspath(path))
    while not os.path.lexists(here) and here != here.parent:
        here = here.parent
    return here


def check_writable(path: str | os.PathLike, what: str, hint: str, folder: bool = False) -> None:
    """Raise one line when the local output ``path`` cannot be written: ``what`` names it (``the
    memory``, ``the report``), ``hint`` says what to do. ``folder``: the output is a directory that
    is written into (a memory) rather than a file that is replaced."""
    target = Path(path)
    if target.exists() and not target.is_dir() and not target.is_file():
        return  # a device or FIFO (/dev/stdout): written through, not replaced in its folder
    where = target if folder and target.is_dir() else nearest_folder(target.parent if not folder else target)
    if target.is_dir() and not folder:
        raise InputError(f"{path}: is a folder; {hint}")
    if not where.is_dir():
        raise InputError(f"{path}: cannot write {what} there ({where} is a file, not a folder); {hint}")
    try:
        fd, probe = tempfile.mkstemp(prefix=".m3-write-check-", dir=where)
    except OSError as exc:
        if exc.errno not in UNWRITABLE:
            raise
        raise InputError(f"{path}: cannot write {what} there ({exc.strerror or exc}); {hint}") from None
    os.close(fd)
    os.unlink(probe)


def unwritable(exc: BaseException) -> TypeGuard[OSError]:
    """An ``OSError`` of an output folder that cannot be written (read-only, no permission, a file
    where a folder should be)."""
    return isinstance(exc, OSError) and exc.errno in UNWRITABLE
