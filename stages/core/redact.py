"""Credentials written into URLs (``http://user:key@host/v1``) are masked wherever a URL is shown.

A base URL is configuration, so it is printed by ``m3 config show``, named in error messages that
land in records' ``errors`` and on stderr. The user-info part of such a URL is a credential like the
API key and is masked the same way; the host and path stay readable so the message still says
which server failed.
"""

from __future__ import annotations

import re

MASK = "********"

#: scheme://userinfo@ — userinfo is anything up to the first '@' that has no '/', '?', '#' or space.
_USERINFO = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<userinfo>[^/?#@\s]+)@")


def mask_url(url: str | None) -> str | None:
    """``url`` with any ``user:password@`` replaced by the mask (``None`` stays ``None``)."""
    return None if url is None else mask_credentials(url)


def mask_credentials(text: str) -> str:
    """Every URL's user-info in ``text`` masked: ``http://u:k@h/v1`` -> ``http://********@h/v1``."""
    return _USERINFO.sub(lambda m: f"{m.group('scheme')}{MASK}@", text)
