"""Where a memory lives: a local directory or an object-store URI that LanceDB opens (``s3://...``).

Object stores are reached with the standard variables of their SDKs (for S3: ``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_REGION``/``AWS_DEFAULT_REGION``, and
``AWS_ENDPOINT_URL`` with ``AWS_ALLOW_HTTP=true`` for an S3-compatible server such as MinIO). m3 never
reads, copies or prints them: LanceDB's object-store layer takes them from the environment itself.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Any

from m3cli.stages.core.errors import M3Error
from m3cli.stages.core.redact import mask_credentials

_URI = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")


def is_uri(target: str | Path) -> bool:
    """True for ``s3://bucket/mem.lance``-style locations (not plain paths, not ``file://``)."""
    text = str(target) if isinstance(target, str) else ""
    return bool(_URI.match(text)) and not text.startswith("file://")


def memory_location(target: str | Path) -> str | Path:
    """A URI stays a string (``Path`` would fold ``s3://`` into ``s3:/``); anything else is a Path."""
    if isinstance(target, str) and is_uri(target):
        return target.rstrip("/")
    return Path(target)


def _object_store(uri: str) -> tuple[Any, str]:
    """The pyarrow filesystem of an object-store URI and the path inside it (credentials and endpoint
    from the SDK's standard environment variables, as LanceDB reads them)."""
    from pyarrow import fs

    try:
        return fs.FileSystem.from_uri(uri)
    except Exception as exc:  # pyarrow raises ArrowInvalid/OSError for unknown schemes or bad URIs
        raise M3Error(f"{mask_credentials(uri)}: cannot open this object store: {exc}") from None


def read_file(location: str | Path, name: str) -> bytes | None:
    """The bytes of file ``name`` inside the memory at ``location``, or None when it does not exist."""
    if isinstance(location, Path):
        try:
            return (location / name).read_bytes()
        except FileNotFoundError:
            return None
    store, root = _object_store(location)
    from pyarrow import fs

    if store.get_file_info(f"{root}/{name}").type == fs.FileType.NotFound:
        return None
    with store.open_input_stream(f"{root}/{name}") as fh:
        return fh.read()


def _umask() -> int:
    """The process's umask (read by setting it and putting it back: there is no other portable way)."""
    current = os.umask(0o022)
    os.umask(current)
    return current


def write_atomic(path: Path, data: bytes, sync: bool = False, mode: int | None = None) -> None:
    """Write ``data`` to the local ``path`` via a temporary sibling and a rename: readers see all or
    nothing, and a failed write leaves no partial file. ``sync`` flushes it to disk before the rename
    (a commit that must survive a crash); ``mode`` replaces the default, which is what any new file
    gets (0666 less the umask), not mkstemp's 0600.

    A target that exists and is not a regular file (``/dev/null``, a FIFO, a terminal, a socket) is
    written through, never renamed over: ``-o /dev/null`` as root must not replace the device."""
    try:
        st = os.stat(path)
    except OSError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode) and not stat.S_ISDIR(st.st_mode):
        with open(path, "wb", buffering=0) as fh:
            view = memoryview(data)
            while view:
                view = view[fh.write(view) or 0 :]
        return
    directory = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        os.fchmod(fd, mode if mode is not None else 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            if sync:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_file(location: str | Path, name: str, data: bytes) -> None:
    """Write ``name`` inside the memory at ``location``, all of it or nothing: a synced temporary
    sibling renamed into place on disk; one PUT on an object store (objects appear whole)."""
    if isinstance(location, Path):
        target = location / name
        target.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(target, data, sync=True)
        return
    store, root = _object_store(location)
    with store.open_output_stream(f"{root}/{name}") as fh:
        fh.write(data)


def file_exists(location: str | Path, name: str) -> bool:
    if isinstance(location, Path):
        return (location / name).is_file()
    from pyarrow import fs

    store, root = _object_store(location)
    return store.get_file_info(f"{root}/{name}").type == fs.FileType.File


def subdirs(location: str | Path) -> list[str]:
    """Names of the folders directly inside ``location`` (none if it does not exist)."""
    if isinstance(location, Path):
        return [p.name for p in location.iterdir() if p.is_dir()] if location.is_dir() else []
    from pyarrow import fs

    store, root = _object_store(location)
    listed = store.get_file_info(fs.FileSelector(root, allow_not_found=True))
    return [i.base_name for i in listed if i.type == fs.FileType.Directory]


def remove_dir(location: str | Path, name: str) -> None:
    """Delete the folder ``name`` inside ``location`` with everything in it."""
    if isinstance(location, Path):
        shutil.rmtree(location / name)
        return
    store, root = _object_store(location)
    store.delete_dir(f"{root}/{name}")


#: What object-store failures say deep inside LanceDB/Lance/pyarrow messages, and what m3 says instead.
_STORE_FAILURES: tuple[tuple[tuple[str, ...], str], ...] = (
    (
        ("NoSuchBucket", "NO_SUCH_BUCKET", "bucket does not exist"),
        "the bucket does not exist (create it, or check the name)",
    ),
    (
        (
            "Failed to get AWS credentials",
            "InvalidAccessKeyId",
            "SignatureDoesNotMatch",
            "AccessDenied",
            "Missing credentials",
            "NoCredentialProviders",
            "403 Forbidden",
        ),
        "the object store refused the credentials or found none: set AWS_ACCESS_KEY_ID and "
        "AWS_SECRET_ACCESS_KEY (and AWS_ENDPOINT_URL, AWS_ALLOW_HTTP=true for a local S3 server)",
    ),
    (
        ("Connection refused", "dns error", "error sending request", "tcp connect error"),
        "cannot reach the object store (check AWS_ENDPOINT_URL and the network)",
    ),
    (
        ("Cannot parse URI", "due to syntax error"),
        "not a valid object-store URI (a '/' or '@' in a password must be percent-encoded; better, give "
        "credentials in the AWS_* variables, never in the URI)",
    ),
)


def store_failure(text: str) -> str | None:
    """A one-line reason for an object-store failure buried in ``text`` (a LanceDB/Lance/pyarrow error
    message, tens of lines long and possibly quoting the request), or None when it is not one."""
    for needles, reason in _STORE_FAILURES:
        if any(n.lower() in text.lower() for n in needles):
            return reason
    return None


def store_location(argv: list[str]) -> str | None:
    """The object-store URI named on a command line (masked), for a message that must name it."""
    for arg in argv:
        if is_uri(arg):
            return mask_credentials(arg)
    return None


def damaged_memory(location: str | Path, exc: BaseException) -> M3Error:
    """One line for a memory whose tables cannot be read as its manifest names them: a version that is
    gone, a data file cut short or overwritten. The message keeps the engine's first line (cut short):
    an object-store reason in it is still recognised (:func:`store_failure`)."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if store_failure(text) is not None:
        return M3Error(f"{mask_credentials(str(location))}: {store_failure(text)}")
    if "no longer exists" in text or "_versions" in text and "not found" in text.lower():
        why = "a table version its manifest names is missing"
    elif "fill whole buffer" in text or "truncated" in text.lower() or "corrupt" in text.lower():
        why = "a data file is truncated or damaged"
    else:
        why = "its tables cannot be read"
    return M3Error(
        f"{mask_credentials(str(location))}: the memory is damaged ({why}: {mask_credentials(text)[:160]}); "
        "rebuild it with `m3 index -o` from the records, or restore a copy"
    )
