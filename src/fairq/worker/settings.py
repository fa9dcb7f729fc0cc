"""The settings Worker and fairq.aio.AsyncWorker both take, checked in one place."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from typing import NamedTuple

from .. import _validate as v
from ..errors import InvalidInput
from ..limits import MAX_BATCH, MAX_ID_CHARS


class Settings(NamedTuple):
    owner: str
    concurrency: int
    batch: int
    lease_seconds: float
    timeout: float | None
    stop_timeout: float
    idle_min: float
    idle_max: float


def check_settings(owner: str | None, concurrency: int, batch: int, lease_seconds: float | None,
                   timeout: float | None, stop_timeout: float, idle_min: float, idle_max: float, *,
                   max_concurrency: int, default_lease: Callable[[], float]) -> Settings:
    """The checked settings, in this order (InvalidInput names the first bad one); owner
    defaults to default_owner(), lease_seconds to default_lease() (the queue's)."""
    owner = v.optional_identifier(owner, "owner") or default_owner()
    concurrency = v.count(concurrency, "concurrency", low=1, high=max_concurrency)
    batch = v.count(batch, "batch", low=1, high=MAX_BATCH)
    lease = default_lease() if lease_seconds is None else v.seconds(lease_seconds, "lease_seconds", positive=True)
    timeout = None if timeout is None else v.seconds(timeout, "timeout", positive=True)
    stop_timeout = v.seconds(stop_timeout, "stop_timeout")
    idle_min = v.seconds(idle_min, "idle_min", positive=True)
    idle_max = v.seconds(idle_max, "idle_max")
    if idle_max < idle_min:
        raise InvalidInput("idle_max", f"must be >= idle_min ({idle_min}), got {idle_max}")
    return Settings(owner, concurrency, batch, lease, timeout, stop_timeout, idle_min, idle_max)


def default_owner() -> str:
    """host:pid, the owner label of a worker that was given none."""
    return f"{socket.gethostname()}:{os.getpid()}"[:MAX_ID_CHARS]
