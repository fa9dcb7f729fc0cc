"""Settle together: the settles of a worker's threads (or tasks) that finish at
the same time share one settle_many.

A thread whose job has finished settles it at once: when no settle of this
worker is being written, its own is written alone, now. When one is being
written, it waits for that one (no longer), and then the settles that waited
meanwhile are written together, in one transaction, by one of them. Each
gets back the results of its own items (settle_many answers item by item: a
lost lease is one item's result, never another's); an error of the call
itself (the database out of reach) is raised to every thread whose items it
carried, none of which were written.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, TypeVar

R = TypeVar("R")


class _Waiting(Generic[R]):
    """One thread's items and, once written, its results or the call's error."""

    def __init__(self, items: Sequence[Any]) -> None:
        self.items = items
        self.results: list[R] | None = None
        self.error: BaseException | None = None


def _share(waiting: list[_Waiting[R]], results: Sequence[R]) -> None:
    """Hand each waiting thread the results of its own items, in order."""
    at = 0
    for w in waiting:
        w.results = list(results[at:at + len(w.items)])
        at += len(w.items)


class SettleTogether(Generic[R]):
    """settle(items) -> results of settle_many(items), written with the settles that waited beside it."""

    def __init__(self, settle_many: Callable[[list[Any]], Sequence[R]]) -> None:
        self._settle_many = settle_many
        self._cond = threading.Condition()
        self._writing = False
        self._waiting: list[_Waiting[R]] = []

    def settle(self, items: Sequence[Any]) -> list[R]:
        mine: _Waiting[R] = _Waiting(items)
        with self._cond:
            self._waiting.append(mine)
            while self._writing and mine.results is None and mine.error is None:
                self._cond.wait()
            if mine.results is None and mine.error is None:
                group, self._waiting = self._waiting, []
                self._writing = True
        if mine.results is None and mine.error is None:
            try:
                _share(group, self._settle_many([item for w in group for item in w.items]))
            except BaseException as exc:  # nothing of the group was written: each raises it
                for w in group:
                    w.error = exc
            finally:
                with self._cond:
                    self._writing = False
                    self._cond.notify_all()
        if mine.error is not None:
            raise mine.error
        assert mine.results is not None
        return mine.results


class AsyncSettleTogether(Generic[R]):
    """SettleTogether for the tasks of an AsyncWorker, on one event loop."""

    def __init__(self, settle_many: Callable[[list[Any]], Awaitable[Sequence[R]]]) -> None:
        self._settle_many = settle_many
        self._done: asyncio.Event | None = None  # set when the settle being written ends
        self._waiting: list[_Waiting[R]] = []

    async def settle(self, items: Sequence[Any]) -> list[R]:
        mine: _Waiting[R] = _Waiting(items)
        self._waiting.append(mine)
        while self._done is not None and mine.results is None and mine.error is None:
            await self._done.wait()
        if mine.results is None and mine.error is None:
            group, self._waiting = self._waiting, []
            self._done = done = asyncio.Event()
            try:
                _share(group, await self._settle_many([item for w in group for item in w.items]))
            except BaseException as exc:  # a cancelled write counts as not written for the others too
                for w in group:
                    w.error = exc
            finally:
                self._done = None
                done.set()
        if mine.error is not None:
            raise mine.error
        assert mine.results is not None
        return mine.results
