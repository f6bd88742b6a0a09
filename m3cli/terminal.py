"""Text for people's terminals: control characters from data are shown, never obeyed.

Memory lines, transcripts, file names and server messages are data. Printed raw, an ANSI/OSC escape
sequence in them would recolour or clear the terminal or retitle its window, a carriage return would
overwrite what was printed before it, and a newline would forge a line of our own output (a fake
``A:`` or ``m3: error:`` line). Every human-readable output goes through this module:

- :func:`safe` renders one value on one line: every control character (C0 including newline and
  tab, DEL, C1), line and paragraph separators and bidirectional overrides become visible escapes
  (``\\n``, ``\\x1b``, ``\\u202e``).
- :func:`safe_lines` keeps the newlines and tabs of a text this program laid out (a table, a
  report) and escapes everything else; :func:`echo` prints through it.

JSON and JSONL outputs are not touched: their encoders already escape control characters.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import typer

from m3cli.stages.core.redact import mask_credentials

_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
#: Besides C0: DEL, C1 controls, line/paragraph separators, bidi embeddings/overrides/isolates/marks.
_OTHER = "\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\u061c\u200e\u200f"
_ANY_CONTROL = re.compile(f"[\x00-\x1f{_OTHER}]")
_CONTROL_BUT_LAYOUT = re.compile(f"[\x00-\x08\x0b-\x1f{_OTHER}]")  # keeps \t and \n


def _escape(match: re.Match[str]) -> str:
    ch = match.group(0)
    if ch in _SHORT:
        return _SHORT[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe(value: Any) -> str:
    """``value`` as one printable line: control characters become visible escapes."""
    return _ANY_CONTROL.sub(_escape, str(value))


def safe_lines(text: str) -> str:
    """``text`` with its own line breaks and tabs kept and every other control character escaped."""
    return _CONTROL_BUT_LAYOUT.sub(_escape, text)


def safe_data(value: Any) -> Any:
    """A copy of a JSON-like value with every string passed through :func:`safe` (keys included)."""
    if isinstance(value, str):
        return safe(value)
    if isinstance(value, Mapping):
        return {safe(k) if isinstance(k, str) else k: safe_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [safe_data(v) for v in value]
    return value


def echo(text: str = "", err: bool = False, nl: bool = True) -> None:
    """``typer.echo`` for human-readable output: layout kept, any other control character escaped."""
    typer.echo(safe_lines(text), err=err, nl=nl)


def error_line(message: Any) -> str:
    """The one ``m3: error:`` line for ``message``: on one line, no control characters, URL
    credentials masked (messages quote records, file names and servers' replies)."""
    return f"m3: error: {safe(mask_credentials(str(message)))}"


def log_message(message: str) -> str:
    """A log message as printed on stderr: one line, credentials masked."""
    return safe(mask_credentials(message))
