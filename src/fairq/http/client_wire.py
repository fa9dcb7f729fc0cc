"""What fairq.Client sends and reads back: its arguments in the wire's shapes
(settle items, leases, enqueue_many items, backoffs), the refusal of what a
remote call cannot honour, and a settle_many slot read back."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import InvalidInput, LeaseLost, RemoteError
from ..kernel.policy import Backoff
from ..leases import lease_attempts, lease_key, settle_parts
from ..types import Settled
from .wire import check_json, error_from_json, from_json


def server_side(*, now: Any = None, effect: Any = None, conn: Any = None) -> None:
    """Refuse the arguments a remote call cannot honour."""
    if now is not None:
        raise InvalidInput("now", "cannot be sent to a server: the server uses its own clock")
    if effect is not None:
        raise InvalidInput("effect", "cannot be sent to a server: no code runs inside a remote transaction")
    if conn is not None:
        raise InvalidInput("conn", "cannot be sent to a server: a remote enqueue cannot join a local transaction")


def wire_settle_item(item: Any) -> dict[str, Any]:
    lease, outcome, reason, delay, result = settle_parts(item)
    wire = {"lease": wire_lease(lease), "outcome": outcome, "reason": reason, "delay": delay}
    if result is not None:
        check_json(result, "result")
        wire["result"] = result
    return wire


def wire_lease(lease: Any) -> dict[str, Any]:
    """The lease's key, and the attempts it was handed with when it carries them."""
    event_id, generation = lease_key(lease, "lease")
    attempts = lease_attempts(lease)
    if attempts is None:
        return {"event_id": event_id, "generation": generation}
    return {"event_id": event_id, "generation": generation, "attempts": attempts}


def wire_item(item: Any) -> Any:
    """An enqueue_many item as the server takes it; the server's Queue judges its shape."""
    if type(item) is tuple:
        if 2 <= len(item) <= 4:
            return {"event_id": item[0], "body": item[1], "flow": item[2] if len(item) >= 3 else None,
                    "tenant": item[3] if len(item) == 4 else None}
        return list(item)
    if isinstance(item, Mapping) and isinstance(item.get("backoff"), Backoff):
        return {**item, "backoff": wire_backoff(item["backoff"])}
    return item


def wire_backoff(backoff: Any) -> Any:
    """A backoff as the server takes it: a fairq.Backoff as the dict of its
    fields; anything else as given (the server's Queue judges it)."""
    if isinstance(backoff, Backoff):
        return {"base": backoff.base, "factor": backoff.factor, "cap": backoff.cap, "jitter": backoff.jitter}
    return backoff


def settle_result(data: dict[str, Any]) -> Settled | LeaseLost:
    if "error" in data:
        lost = error_from_json(409, data)
        if not isinstance(lost, LeaseLost):
            raise RemoteError(409, "bad_response", f"a settle_many slot holds {data['error']!r}")
        return lost
    return from_json(Settled, data)
