"""fairq over HTTP: `fairq serve` (fairq.http.server) and fairq.Client.

routes.py has one function per endpoint, wire.py the JSON forms of values
and refusals that both ends share. docs/http.md describes the protocol.
"""

from .client import Client

__all__ = ["Client"]
