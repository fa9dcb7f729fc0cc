"""The tenant table's writes outside a claim: tenants made on first use and
joined to the rotation by an enqueue, the count of runnable heads and the
holds the other verbs keep, and set_tenant.

Runs inside a queue write transaction (store.txn.TxnCore); never commits.
tenant.runnable and tenant.ready_n are exact: every verb that changes the
runnable flag of a tenant's head, or the state of its event from or to
ready, adds the change here, in the same transaction (a claim does in
store.tenant_claim). Where a head joins, and the token bucket's
settings, are fairq.kernel.tenants' to say.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from ...errors import Conflict
from ...kernel.tenants import Bucket, join
from ...types import TenantInfo
from .tenant_reads import tenant_info
from .txn import TxnCore


class Joining:
    """A tenant named by an enqueue batch, as the batch moves it."""

    __slots__ = ("tenant_id", "name", "pass_", "turn", "tail", "has_head", "runnable", "ready", "joined")

    def __init__(self, tenant_id: int, name: str, pass_: int, turn: int, tail: int, has_head: bool) -> None:
        self.tenant_id = tenant_id
        self.name = name
        self.pass_ = pass_
        self.turn = turn
        self.tail = tail
        self.has_head = has_head
        self.runnable = 0  # runnable heads the batch adds
        self.ready = 0  # ready events the batch adds
        self.joined = False  # whether the batch put it back in the rotation

    def head_pass(self, tx: TxnCore) -> int:
        """The pass of a head the batch gives one of its idle flows: its own
        tail; a tenant with no head at all joins the rotation behind every
        tenant in it, with a new turn (kernel.tenants.join)."""
        row = tx.state_row()
        joined = join(tail=row.tail, tenant_tail=self.tail, tenant_pass=self.pass_ if self.has_head else None)
        if not self.has_head:
            self.pass_, self.turn = joined.tenant_pass, tx.next_turn()
            self.has_head = self.joined = True
        return joined.flow_pass


def joining(tx: TxnCore, names: Iterable[str]) -> dict[str, Joining]:
    """The tenants of an enqueue batch by name, each made if new (weight 1,
    no limits), with whether it has any head now."""
    names_json = json.dumps(sorted(set(names)))
    conn = tx.connection
    # A tenant is made by the first event (or set_tenant) that names it.
    conn.execute("INSERT INTO tenant (name) SELECT value FROM json_each(:names) WHERE true "
                 "ON CONFLICT (name) DO NOTHING", {"names": names_json})
    # Whether it has a head, waiting, leased or quarantined: one step into its heads' index.
    rows = conn.execute(
        "SELECT t.tenant_id, t.name, t.pass, t.turn, t.tail, EXISTS (SELECT 1 FROM event "
        "INDEXED BY event_tenant_heads WHERE tenant_id = t.tenant_id AND pass IS NOT NULL) "
        "FROM tenant AS t WHERE t.name IN (SELECT value FROM json_each(:names))",
        {"names": names_json})
    return {row[1]: Joining(row[0], row[1], row[2], row[3], row[4], bool(row[5])) for row in rows}


def write_joined(tx: TxnCore, tenants: Iterable[Joining]) -> None:
    """Store where an enqueue batch left its tenants: the place of each that
    joined the rotation, its new runnable heads and its new ready events."""
    params = [{"tenant_id": t.tenant_id, "pass": t.pass_, "turn": t.turn, "runnable": t.runnable,
               "ready": t.ready} for t in tenants if t.joined or t.runnable or t.ready]
    if params:
        # The counts of runnable heads and ready events: the batch's are added.
        tx.connection.executemany(
            "UPDATE tenant SET pass = :pass, turn = :turn, runnable = runnable + :runnable, "
            "ready_n = ready_n + :ready WHERE tenant_id = :tenant_id", params)


def tenant_name(tx: TxnCore, tenant_id: int | None) -> str | None:
    """A tenant's name by id (None for None)."""
    if tenant_id is None:
        return None
    found = tx.connection.execute("SELECT name FROM tenant WHERE tenant_id = :tenant_id",
                                  {"tenant_id": tenant_id}).fetchone()
    return None if found is None else str(found[0])


def flow_conflict(event_id: str, flow: str, stored: str | None, asked: str | None) -> Conflict:
    """An enqueue to a flow that belongs to another tenant (or to none)."""
    if stored is None:
        return Conflict(event_id, "tenant", f"flow {flow!r} has no tenant, not {asked!r}")
    if asked is None:
        return Conflict(event_id, "tenant", f"flow {flow!r} belongs to tenant {stored!r}, not to no tenant")
    return Conflict(event_id, "tenant", f"flow {flow!r} belongs to tenant {stored!r}, not {asked!r}")


class Counts:
    """Changes to tenants' counts of runnable heads and ready events, and
    tenants whose hold ends (one of their leases ended), gathered by a verb
    and written once."""

    __slots__ = ("_runnable", "_ready", "_released")

    def __init__(self) -> None:
        self._runnable: dict[int, int] = {}
        self._ready: dict[int, int] = {}
        self._released: set[int] = set()

    def add(self, tenant_id: int | None, runnable: int, ready: int = 0) -> None:
        """A head of the tenant became runnable (+1) or stopped being so (-1);
        events of it became ready (+) or stopped being so (-)."""
        if tenant_id is not None:
            if runnable:
                self._runnable[tenant_id] = self._runnable.get(tenant_id, 0) + runnable
            if ready:
                self._ready[tenant_id] = self._ready.get(tenant_id, 0) + ready

    def lease_ended(self, tenant_id: int | None) -> None:
        """An event of the tenant left inflight: a slot under its cap may be free."""
        if tenant_id is not None:
            self._released.add(tenant_id)

    def write(self, tx: TxnCore) -> None:
        ids = self._released | set(self._runnable) | set(self._ready)
        if not ids:
            return
        # runnable and ready_n stay the counts of the tenant's runnable heads
        # and ready events; a hold ends when a lease ends, and the next claim
        # judges the tenant again. A tenant that does not change is not
        # written (no page to sync).
        tx.connection.executemany(
            "UPDATE tenant SET runnable = runnable + :runnable, ready_n = ready_n + :ready, "
            "held_until_ms = CASE WHEN :released THEN 0 ELSE held_until_ms END WHERE tenant_id = :tenant_id "
            "AND (:runnable != 0 OR :ready != 0 OR (:released AND held_until_ms > 0))",
            [{"tenant_id": t, "runnable": self._runnable.get(t, 0), "ready": self._ready.get(t, 0),
              "released": int(t in self._released)} for t in sorted(ids)])


def set_tenant(tx: TxnCore, name: str, *, weight: int | None, max_inflight: int | None, rate: int | None,
               burst: int | None, reason: str | None, actor: str | None, now_ms: int) -> TenantInfo:
    """Store a tenant's settings (None: as stored; a new tenant starts at
    weight 1 and no limits; a rate without a burst gets burst = rate), with
    one 'set_tenant' audit row; the tenant as stored. Settings no bucket can
    follow raise InvalidInput before anything is written."""
    conn = tx.connection
    found = conn.execute("SELECT weight, max_inflight, rate, burst FROM tenant WHERE name = :name",
                         {"name": name}).fetchone()
    before = None if found is None else dict(zip(("weight", "max_inflight", "rate", "burst"), found))
    after: dict[str, Any] = dict(before or {"weight": 1, "max_inflight": 0, "rate": 0, "burst": 0})
    for key, value in (("weight", weight), ("max_inflight", max_inflight), ("rate", rate), ("burst", burst)):
        if value is not None:
            after[key] = value
    if after["rate"] > 0 and after["burst"] == 0:
        after["burst"] = after["rate"]
    Bucket.full(after["burst"], now_ms).level(now_ms, after["rate"], after["burst"])  # InvalidInput if unfit
    # The settings change; the place, the count and the bucket's tokens are
    # kept (a smaller burst caps the tokens when next read). A hold ends: the
    # next claim judges the tenant by its new limits.
    conn.execute(
        "INSERT INTO tenant (name, weight, max_inflight, rate, burst) "
        "VALUES (:name, :weight, :max_inflight, :rate, :burst) "
        "ON CONFLICT (name) DO UPDATE SET weight = excluded.weight, max_inflight = excluded.max_inflight, "
        "rate = excluded.rate, burst = excluded.burst, held_until_ms = 0",
        {"name": name, **after})
    tx.record("", "set_tenant", reason, actor, None, now_ms, {"tenant": name, "before": before, "after": after})
    info = tenant_info(conn, name, now_ms)
    assert info is not None
    return info
