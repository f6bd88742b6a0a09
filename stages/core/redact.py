"""Credentials written into URLs are masked wherever a URL is shown.

A base URL or a memory's ``s3://`` location is configuration, so it is printed by ``m3 config show``,
named in error messages that land in records' ``errors`` and on stderr, and kept in answer records
and report pages. Two places in a URL hold credentials:

* the user-info part (``http://user:key@host/v1``, ``s3://KEY:SECRET@bucket/mem``), which may itself
  hold ``@`` or ``/`` when a password was pasted unescaped: everything from ``scheme://`` to the last
  ``@`` of the URL is masked when that span has a ``:`` (``user:password``) or no ``/`` at all;
* query parameters named like a credential (``?api_key=``, ``&token=``, ``X-Amz-Signature=``...).

The host and path stay readable so the message still says which server failed.
"""

from __future__ import annotations

import re

MASK = "********"

#: A URL: scheme:// then everything up to white space or a quote/bracket that ends it in prose.
_URL = re.compile(r"\b(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<rest>[^\s'\"<>`]+)")
#: Query or fragment parameters whose value is a credential.
_SECRET_PARAM = re.compile(
    r"(?P<name>[?&;#](?:[\w.-]*(?:api[_-]?key|apikey|token|secret|passw(?:or)?d|pwd|signature|"
    r"credential|auth[\w-]*|session|key|sig)[\w.-]*)=)(?P<value>[^&;#\s'\"]*)",
    re.IGNORECASE,
)


def mask_url(url: str | None) -> str | None:
    """``url`` with its credentials masked (``None`` stays ``None``)."""
    return None if url is None else mask_credentials(url)


def _mask_one(match: re.Match) -> str:
    scheme, rest = match.group("scheme"), match.group("rest")
    at = rest.rfind("@")
    if at > 0:
        userinfo = rest[:at]
        if ":" in userinfo or "/" not in userinfo:
            rest = f"{MASK}@{rest[at + 1 :]}"
    rest = _SECRET_PARAM.sub(lambda m: f"{m.group('name')}{MASK}", rest)
    return scheme + rest


def mask_credentials(text: str) -> str:
    """Every URL's credentials in ``text`` masked: ``http://u:k@h/v1?api_key=x`` ->
    ``http://********@h/v1?api_key=********``."""
    return _URL.sub(_mask_one, text)
