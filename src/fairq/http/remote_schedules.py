"""``client.schedules``: the methods of ``queue.schedules`` over HTTP (fairq.http.client)."""

from __future__ import annotations

import builtins
import sys
from typing import TYPE_CHECKING, Any

from ..types import AuditEntry, Misfire, Schedule
from .paths import query, segment
from .wire import from_json

if TYPE_CHECKING:
    from .client import Client

__all__ = ["RemoteSchedules"]


class RemoteSchedules:
    """``client.schedules``: the methods of ``queue.schedules`` on the server's
    schedules, each one request; the same Schedule values back, the same errors."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def add(
        self, name: str, *, every: float | None = None, cron: str | None = None, tz: str = "UTC",
        body: Any = None, flow: str | None = None, overlap: bool = False, start: float | None = None,
        misfire: Misfire | str = Misfire.COALESCE, grace: float | None = None,
    ) -> Schedule:
        """Schedules.add on the server (start defaults to the server's clock)."""
        data = self._client._post("/v1/schedules", name=name, every=every, cron=cron, tz=tz, body=body, flow=flow,
                                  overlap=overlap, start=start, misfire=misfire, grace=grace)
        return from_json(Schedule, data)

    def get(self, name: str) -> Schedule:
        """Schedules.get on the server; UnknownSchedule if there is none."""
        return from_json(Schedule, self._client._call("GET", _schedule_path(name)))

    def list(self) -> list[Schedule]:
        """Schedules.list on the server: every schedule, by name (a page of at most MAX_PAGE a request)."""
        return self._client._pages("/v1/schedules", "schedules", Schedule, sys.maxsize, {})

    def misfires(self, name: str, *, limit: int = 20) -> builtins.list[AuditEntry]:
        """Schedules.misfires on the server; UnknownSchedule if there is none."""
        data = self._client._call("GET", _schedule_path(name) + "/misfires", query(ints={"limit": limit}))
        return [from_json(AuditEntry, a) for a in data["misfires"]]

    def remove(self, name: str) -> None:
        """Schedules.remove on the server; UnknownSchedule if there is none."""
        self._client._call("DELETE", _schedule_path(name))

    def pause(self, name: str) -> Schedule:
        """Schedules.pause on the server; UnknownSchedule if there is none."""
        return from_json(Schedule, self._client._post(_schedule_path(name) + "/pause"))

    def resume(self, name: str) -> Schedule:
        """Schedules.resume on the server; UnknownSchedule if there is none."""
        return from_json(Schedule, self._client._post(_schedule_path(name) + "/resume"))


def _schedule_path(name: Any) -> str:
    return "/v1/schedules/" + segment(name, "name")
