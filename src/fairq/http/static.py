"""The console's files (fairq/http/console: HTML, CSS, JavaScript) as answers.

They are package data, read once per request from the installed package; no
build step. Only plain file names of known types are served, each with its
content type (the handler adds nosniff to every answer) and a strict Content-Security-Policy: scripts and styles only
from this server, no inline code, no framing, data fetched only from this
server. The files hold no data: the page fetches it from /v1 with the token.
"""

from __future__ import annotations

import importlib.resources
import re

from .routes import Refusal, Text

__all__ = ["console_file", "SECURITY_HEADERS"]

_TYPES = {
    "html": "text/html; charset=utf-8",
    "css": "text/css; charset=utf-8",
    "js": "text/javascript; charset=utf-8",
}
_NAME = re.compile(r"[a-z0-9][a-z0-9_-]*\.(html|css|js)")

#: Sent with every console file.
SECURITY_HEADERS = {
    "Content-Security-Policy": ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
                                "connect-src 'self'; base-uri 'none'; form-action 'none'; "
                                "frame-ancestors 'none'"),
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}


def console_file(name: str) -> Text:
    """The console file called `name`, or a not_found refusal."""
    match = _NAME.fullmatch(name)
    if match is None:
        raise Refusal("not_found", f"no console file {name!r}")
    resource = importlib.resources.files(__package__).joinpath("console", name)
    try:
        text = resource.read_text(encoding="utf-8")
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        raise Refusal("not_found", f"no console file {name!r}") from None
    return Text(text, _TYPES[match.group(1)], dict(SECURITY_HEADERS))
