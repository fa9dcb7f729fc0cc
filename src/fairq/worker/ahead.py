"""Claim ahead: the threads (or tasks) of one worker that are about to claim
one event each are served by one claim_many for all of them.

A worker with concurrency > 1 and batch 1 runs each job alone and settles
it as soon as it finishes. Without this, n idle threads would send n claims,
each its own transaction; here the thread whose turn it is asks for as many
events as threads are waiting to claim (itself included, at most `limit`)
and keeps the rest for them. Each waiting thread takes the next lease in
claim order, so the leases are the ones n claims in a row would have taken,
in the same order. A lease is kept only until a thread already waiting takes
it (they wait for the same turn), never across rounds; `left()` hands back
any a stopped run did not take, to be released.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable

from ..types import Lease


class ClaimAhead:
    """One claim for the threads waiting to claim; take() returns one lease ([] when none was claimable)."""

    def __init__(self, claim: Callable[[int], list[Lease]], limit: int) -> None:
        self._claim = claim
        self._limit = limit
        self._turn = threading.Lock()  # one claim at a time
        self._count = threading.Lock()  # guards _waiting
        self._waiting = 0  # threads inside take()
        self._ahead: list[Lease] = []  # claimed for waiting threads, the next one last

    def take(self) -> list[Lease]:
        with self._count:
            self._waiting += 1
        try:
            with self._turn:
                if not self._ahead:
                    with self._count:
                        wanted = min(self._waiting, self._limit)
                    self._ahead = self._claim(wanted)[::-1]
                return [self._ahead.pop()] if self._ahead else []
        finally:
            with self._count:
                self._waiting -= 1

    def left(self) -> list[Lease]:
        """The leases no thread took, in claim order (none unless a run stopped with some kept)."""
        with self._turn:
            left, self._ahead = self._ahead[::-1], []
        return left


class AsyncClaimAhead:
    """ClaimAhead for the tasks of an AsyncWorker, on one event loop."""

    def __init__(self, claim: Callable[[int], Awaitable[list[Lease]]], limit: int) -> None:
        self._claim = claim
        self._limit = limit
        self._turn: asyncio.Lock | None = None  # made on the loop that first uses it
        self._waiting = 0
        self._ahead: list[Lease] = []

    async def take(self) -> list[Lease]:
        if self._turn is None:
            self._turn = asyncio.Lock()
        self._waiting += 1
        try:
            async with self._turn:
                if not self._ahead:
                    self._ahead = (await self._claim(min(self._waiting, self._limit)))[::-1]
                return [self._ahead.pop()] if self._ahead else []
        finally:
            self._waiting -= 1

    def left(self) -> list[Lease]:
        """The leases no task took (a task cancelled while waiting for its turn leaves its lease here)."""
        left, self._ahead = self._ahead[::-1], []
        return left
