"""``client.schedules``: the methods of ``queue.schedules`` over HTTP, each one
request through the Client's transport (fairq.http.transport)."""

from __future__ import annotations

import builtins
import sys
from typing import Any

from ..types import AuditEntry, Misfire, Schedule
from .paths import query
from .transport import Transport
from .wire import from_json

__all__ = ["RemoteSchedules"]


class RemoteSchedules:
    """``client.schedules``: the methods of ``queue.schedules`` on the server's
    schedules, each one request; the same Schedule values back, the same errors."""

    def __init__(self, http: Transport) -> None:
        self._http = http

    def add(
        self, name: str, *, every: float | None = None, cron: str | None = None, tz: str = "UTC",
        body: Any = None, flow: str | None = None, overlap: bool = False, start: float | None = None,
        misfire: Misfire | str = Misfire.COALESCE, grace: float | None = None,
    ) -> Schedule:
        """Schedules.add on the server (start defaults to the server's clock)."""
        data = self._http.post("schedules.add", name=name, every=every, cron=cron, tz=tz, body=body, flow=flow,
                               overlap=overlap, start=start, misfire=misfire, grace=grace)
        return from_json(Schedule, data)

    def get(self, name: str) -> Schedule:
        """Schedules.get on the server; UnknownSchedule if there is none."""
        return from_json(Schedule, self._http.send("schedules.get", {"name": name}))

    def list(self) -> list[Schedule]:
        """Schedules.list on the server: every schedule, by name (a page of at most MAX_PAGE a request)."""
        return self._http.pages("schedules.list", "schedules", Schedule, sys.maxsize, {})

    def misfires(self, name: str, *, limit: int = 20) -> builtins.list[AuditEntry]:
        """Schedules.misfires on the server; UnknownSchedule if there is none."""
        data = self._http.send("schedules.misfires", {"name": name}, query=query(ints={"limit": limit}))
        return [from_json(AuditEntry, a) for a in data["misfires"]]

    def remove(self, name: str) -> None:
        """Schedules.remove on the server; UnknownSchedule if there is none."""
        self._http.send("schedules.remove", {"name": name})

    def pause(self, name: str) -> Schedule:
        """Schedules.pause on the server; UnknownSchedule if there is none."""
        return from_json(Schedule, self._http.post("schedules.pause", {"name": name}))

    def resume(self, name: str) -> Schedule:
        """Schedules.resume on the server; UnknownSchedule if there is none."""
        return from_json(Schedule, self._http.post("schedules.resume", {"name": name}))

