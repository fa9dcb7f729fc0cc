"""Tenants as pure rules: the two-level rotation, its fairness bound, and the
limits (max_inflight, the rate/burst token bucket). A small in-test queue
plays the claims a store would make, on plain values, with no database.

The bound tested, and why it holds. Take k tenants of weights w_1..w_k
(W = their sum), each always holding a claimable head, all joining before the
first claim, and strides S/w_i exact (S = STRIDE_UNIT; every weight 1..16
divides it). A claim goes to the lowest pass p_j and moves it to p_j + S/w_j,
so every tenant i, once claimed, has p_i - S/w_i <= p_j for every j (it was
the lowest when last claimed, and passes only grow). With c_i claims p_i =
c_i * S/w_i, so for every pair

    (c_i - 1) / w_i <= c_j / w_j.                                      (1)

Summing (1) over j (times w_j) gives, after every prefix of n claims,

    n * w_i / W - k * w_i / W  <=  c_i  <=  n * w_i / W + 1,           (2)

and both sides are at most w_i (k <= W; w_i >= 1): each tenant is within ONE
ROUND of its share, a round being one claim per unit of weight (W claims, w_i
of them tenant i's): at most one claim ahead, at most w_i * k / W behind
(a full round only when every weight is 1). Nothing in (1) or (2) depends on
a tenant's number of flows: the tenant level never looks at them. Within a
tenant the same argument, over its flows and its own claims (c_t of them),
gives (2) with c_t for n, flow weights for weights, its flow count for k.
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fairq.errors import InvalidInput
from fairq.kernel.policy import MAX_WEIGHT, STRIDE_UNIT
from fairq.kernel.rules import join_pass, rotate
from fairq.kernel.tenants import MILLI, Blocked, Bucket, Limit, at_cap, blocked_by, join, tenant_step

PROPERTY = settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))


# -- a queue on plain values, claiming as a store does --------------------------------


@dataclass
class Tenant:
    """A tenant's stored values; pass_ None while it has no head (out of the rotation)."""

    weight: int
    max_inflight: int = 0
    rate: int = 0
    burst: int = 1
    pass_: int | None = None
    turn: int = 0
    vtime: int = 0
    tail: int = 0
    heads: int = 0
    inflight: int = 0
    bucket: Bucket | None = None


@dataclass
class Flow:
    """A flow's stored values: its unacked events (head included) and its head's pass and turn."""

    tenant: str
    weight: int
    waiting: int = 0
    pass_: int = 0
    turn: int = 0
    leased: bool = False


class TwoLevelQueue:
    """Heads, tenants and the queue's counters, moved only by the rules under test."""

    def __init__(self) -> None:
        self.tenants: dict[str, Tenant] = {}
        self.flows: dict[str, Flow] = {}
        self.ready: dict[str, list[tuple[int, int, str]]] = {}  # tenant -> heap of its claimable heads
        self.vtime = self.tail = self.turn = 0

    def add(self, flow: str, tenant: str, weight: int = 1, tenant_weight: int = 1, events: int = 1) -> None:
        if tenant not in self.tenants:
            self.tenants[tenant] = Tenant(tenant_weight)
            self.ready[tenant] = []
        self.flows.setdefault(flow, Flow(tenant, weight))
        self.enqueue(flow, events)

    def enqueue(self, flow: str, events: int = 1) -> None:
        f = self.flows[flow]
        t = self.tenants[f.tenant]
        if f.waiting == 0:  # an idle flow gets a head: it (and maybe its tenant) joins
            place = join(tail=self.tail, tenant_tail=t.tail, tenant_pass=t.pass_)
            self.turn += 1
            if t.pass_ is None:
                t.pass_, t.turn = place.tenant_pass, self.turn
            f.pass_, f.turn = place.flow_pass, self.turn
            t.heads += 1
            heapq.heappush(self.ready[f.tenant], (f.pass_, f.turn, flow))
        f.waiting += events

    def blocked(self, name: str, now_ms: int) -> Blocked | None:
        t = self.tenants[name]
        return blocked_by(now_ms, inflight=t.inflight, max_inflight=t.max_inflight, bucket=t.bucket,
                          rate=t.rate, burst=t.burst)

    def claim(self, now_ms: int = 0) -> str | None:
        """Lease the next head: lowest (pass, turn) tenant no limit holds, then its lowest head."""
        order = sorted((t.pass_, t.turn, name) for name, t in self.tenants.items()
                       if t.pass_ is not None and self.ready[name])
        for _, _, name in order:
            if self.blocked(name, now_ms) is None:
                break
        else:
            return None
        t = self.tenants[name]
        _, _, flow = heapq.heappop(self.ready[name])  # a ready head's pass and turn do not change
        f = self.flows[flow]
        assert t.pass_ is not None
        step = tenant_step(t.pass_, t.weight, f.pass_, f.weight, vtime=self.vtime, tail=self.tail,
                           tenant_vtime=t.vtime, tenant_tail=t.tail)
        self.turn += 1
        t.pass_, t.turn, self.vtime, self.tail = step.tenant.pass_, self.turn, step.tenant.vtime, step.tenant.tail
        f.pass_, f.turn, t.vtime, t.tail = step.flow.pass_, self.turn, step.flow.vtime, step.flow.tail
        if t.rate:
            taken = (t.bucket or Bucket.full(t.burst, now_ms)).take(now_ms, t.rate, t.burst)
            assert taken is not None  # not blocked: a token is there
            t.bucket = taken
        f.leased, t.inflight = True, t.inflight + 1
        return flow

    def settle(self, flow: str, acked: bool = True) -> None:
        """Ack the head (its successor keeps the pass and turn) or release it."""
        f = self.flows[flow]
        t = self.tenants[f.tenant]
        f.leased, t.inflight = False, t.inflight - 1
        f.waiting -= acked
        if f.waiting:
            heapq.heappush(self.ready[f.tenant], (f.pass_, f.turn, flow))
            return
        t.heads -= 1
        if t.heads == 0:
            t.pass_ = None  # no head left: the tenant leaves the rotation

    def step(self, now_ms: int = 0) -> str:
        """Claim and ack at once (a claim settled before the next): the flow claimed."""
        flow = self.claim(now_ms)
        assert flow is not None
        self.settle(flow)
        return flow


class OneLevelQueue:
    """Today's rotation over flows alone (rules.rotate, rules.join_pass), for comparison."""

    def __init__(self, weights: dict[str, int]) -> None:
        self.weights = weights
        self.waiting = dict.fromkeys(weights, 0)
        self.heads: dict[str, list[int]] = {}  # flow -> [pass, turn] while it has a head
        self.leased: set[str] = set()
        self.vtime = self.tail = self.turn = 0

    def enqueue(self, flow: str) -> None:
        if self.waiting[flow] == 0:
            self.turn += 1
            self.heads[flow] = [join_pass(self.tail), self.turn]
        self.waiting[flow] += 1

    def claim(self) -> str | None:
        ready = [(h[0], h[1], f) for f, h in self.heads.items() if f not in self.leased]
        if not ready:
            return None
        pass_, _, flow = min(ready)
        step = rotate(pass_, self.weights[flow], vtime=self.vtime, tail=self.tail)
        self.turn += 1
        self.heads[flow] = [step.pass_, self.turn]
        self.vtime, self.tail = step.vtime, step.tail
        self.leased.add(flow)
        return flow

    def settle(self, flow: str, acked: bool = True) -> None:
        self.leased.discard(flow)
        self.waiting[flow] -= acked
        if self.waiting[flow] == 0:
            del self.heads[flow]


def check_bound(counts: dict[str, int], weights: dict[str, int]) -> float:
    """Assert bounds (1) and (2) of the module docstring on one prefix, in integers;
    return the worst |c_i - n*w_i/W| in rounds (divided by w_i)."""
    n, total, k = sum(counts.values()), sum(weights.values()), len(weights)
    worst = 0.0
    for i, wi in weights.items():
        ci = counts.get(i, 0)
        assert n * wi - k * wi <= total * ci <= n * wi + total, (i, counts, weights)
        for j, wj in weights.items():
            assert (ci - 1) * wj <= counts.get(j, 0) * wi, (i, j, counts, weights)
        worst = max(worst, abs(ci - n * wi / total) / wi)
    return worst


BACKLOG = 10**9  # events per flow: always backlogged


def build(rng: random.Random, tenant_weights: list[int], flows: tuple[int, int]) -> TwoLevelQueue:
    """Tenants T0.. of the given weights, each with a random number of flows
    (random weights 1..5), every flow always backlogged, joining in random order."""
    q = TwoLevelQueue()
    names = [(f"T{i}", f"T{i}/f{j}") for i, w in enumerate(tenant_weights) for j in range(rng.randint(*flows))]
    for tenant, flow in rng.sample(names, len(names)):
        q.add(flow, tenant, rng.randint(1, 5), tenant_weights[int(tenant[1:])], BACKLOG)
    return q


# -- the two-level rotation: steps ------------------------------------------------------


def test_a_claim_moves_the_tenant_and_the_head_one_stride_each_on_their_own_level() -> None:
    step = tenant_step(100, 2, 7, 4, vtime=50, tail=100, tenant_vtime=0, tenant_tail=7)
    assert step.tenant == rotate(100, 2, vtime=50, tail=100)
    assert step.flow == rotate(7, 4, vtime=0, tail=7)
    assert step.tenant.pass_ == 100 + STRIDE_UNIT // 2 and step.flow.pass_ == 7 + STRIDE_UNIT // 4


def test_an_idle_flow_joins_at_its_tenants_tail_and_an_idle_tenant_at_the_queues_tail() -> None:
    assert join(tail=900, tenant_tail=40, tenant_pass=None) == (900, 40)
    assert join(tail=900, tenant_tail=40, tenant_pass=300) == (300, 40)  # in the rotation: keeps its place


# -- the fairness bound -------------------------------------------------------------------


@PROPERTY
@given(st.lists(st.integers(1, 5), min_size=2, max_size=6), st.randoms(use_true_random=False))
def test_every_prefix_of_claims_keeps_each_tenant_within_one_round_of_its_share(
        weights: list[int], rng: random.Random) -> None:
    q = build(rng, weights, (1, 200))
    counts: dict[str, int] = {}
    for _ in range(300):
        tenant = q.flows[q.step()].tenant
        counts[tenant] = counts.get(tenant, 0) + 1
        assert check_bound(counts, {f"T{i}": w for i, w in enumerate(weights)}) <= 1


@PROPERTY
@given(st.lists(st.integers(1, 5), min_size=2, max_size=5), st.randoms(use_true_random=False))
def test_a_tenants_share_holds_while_leases_are_out_if_it_always_has_a_free_flow(
        weights: list[int], rng: random.Random) -> None:
    # Eight workers: a lease stays out for up to 7 later claims; with 8 flows or
    # more a tenant always has a claimable head, whatever its number of flows.
    q = build(rng, weights, (8, 200))
    counts: dict[str, int] = {}
    out: list[tuple[int, str]] = []  # (settle after claim number, flow)
    for n in range(300):
        flow = q.claim()
        assert flow is not None
        out.append((n + rng.randint(0, 7), flow))
        counts[q.flows[flow].tenant] = counts.get(q.flows[flow].tenant, 0) + 1
        check_bound(counts, {f"T{i}": w for i, w in enumerate(weights)})
        for due, leased in [o for o in out if o[0] <= n]:
            out.remove((due, leased))
            q.settle(leased, acked=rng.random() < 0.8)


@PROPERTY
@given(st.lists(st.integers(1, 5), min_size=1, max_size=4), st.randoms(use_true_random=False))
def test_within_a_tenant_flows_share_its_claims_by_flow_weight_within_one_round(
        weights: list[int], rng: random.Random) -> None:
    q = build(rng, weights, (1, 12))
    counts: dict[str, dict[str, int]] = {t: {} for t in q.tenants}
    for _ in range(400):
        flow = q.step()
        mine = counts[q.flows[flow].tenant]
        mine[flow] = mine.get(flow, 0) + 1
        check_bound(mine, {f: q.flows[f].weight for f in q.flows if q.flows[f].tenant == q.flows[flow].tenant})


@settings(PROPERTY, max_examples=50)
@given(st.lists(st.integers(1, MAX_WEIGHT), min_size=1, max_size=8), st.randoms(use_true_random=False))
def test_with_every_flow_its_own_tenant_claims_follow_todays_rotation_exactly(
        weights: list[int], rng: random.Random) -> None:
    flows = {f"f{i}": w for i, w in enumerate(weights)}
    names = list(flows)
    one, two = OneLevelQueue(flows), TwoLevelQueue()
    leased: list[str] = []  # the same in both while their claims agree
    for _ in range(300):
        action = rng.choice(["enqueue", "claim", "ack", "release"])
        if action == "enqueue":
            flow = rng.choice(names)
            one.enqueue(flow)
            if flow in two.flows:
                two.enqueue(flow)
            else:  # a flow without a tenant: its own tenant, of its own weight
                two.add(flow, tenant=flow, weight=flows[flow], tenant_weight=flows[flow])
        elif action == "claim":
            got = one.claim()
            assert two.claim() == got
            if got is not None:
                leased.append(got)
        elif leased:
            flow = leased.pop(rng.randrange(len(leased)))
            one.settle(flow, acked=action == "ack")
            two.settle(flow, acked=action == "ack")


# -- limits in the rotation --------------------------------------------------------------


def three_tenants(**limits: int) -> TwoLevelQueue:
    """Tenants A, B, C of weight 1, each with 3 backlogged flows; A joins first and has `limits`."""
    q = TwoLevelQueue()
    for tenant in "ABC":
        for j in range(3):
            q.add(f"{tenant}{j}", tenant, events=BACKLOG)
    for name, value in limits.items():
        setattr(q.tenants["A"], name, value)
    return q


def test_a_tenant_at_its_cap_is_skipped_without_losing_its_place_and_goes_first_when_a_slot_frees() -> None:
    q = three_tenants(max_inflight=1)
    first = q.claim()
    assert first == "A0"
    place = q.tenants["A"].pass_
    others = [q.claim() for _ in range(6)]
    assert [q.flows[f].tenant for f in others if f] == list("BCBCBC")
    assert q.blocked("A", 0) == Blocked(Limit.MAX_INFLIGHT, None)
    assert q.tenants["A"].pass_ == place  # skipped, not moved
    q.settle(first)
    assert q.claim() == "A1"  # its turn back first, ahead of B and C
    assert q.tenants["A"].inflight == 1 and q.blocked("A", 0) is not None


def test_a_tenant_out_of_tokens_is_skipped_until_its_next_token_and_then_goes_first() -> None:
    q = three_tenants(rate=1, burst=1)
    times = {}  # claim time (ms) -> tenant, one claim per 100 ms, each acked at once
    for now in range(0, 3_001, 100):
        times[now] = q.flows[q.step(now)].tenant
        if times[now] != "A":
            assert q.blocked("A", now) == Blocked(Limit.RATE, 1_000 * (now // 1_000 + 1))
    assert [t for t, tenant in times.items() if tenant == "A"] == [0, 1_000, 2_000, 3_000]


def test_a_tenant_held_back_banks_no_turns_once_free() -> None:
    q = three_tenants(max_inflight=1)
    held = q.claim()
    for _ in range(20):
        q.step()
    assert held is not None
    q.settle(held)
    got = [q.flows[q.step()].tenant for _ in range(9)]
    assert got.count("A") == 3  # its share from here on, not a burst to catch up


# -- no starvation --------------------------------------------------------------------


def wait_bound(members: dict[str, int], me: str) -> float:
    """Claims others can take between two claims of `me`, given the weights of
    the members of the rotation just after me's claim (me included).

    Me claimed at pass p moves to P = p + S/w_me, and the tail is then >= P:
    a member joining later enters at >= P with a later turn, so it queues
    behind me; a member j already there (pass >= p) goes first at most
    (S/w_me) / (S/w_j) + 1 = w_j / w_me + 1 times before its pass passes P.
    """
    return sum(w / members[me] + 1 for j, w in members.items() if j != me)


@PROPERTY
@given(st.integers(1, 5), st.randoms(use_true_random=False))
def test_a_new_tenant_every_claim_never_starves_an_old_backlogged_tenant(w_old: int, rng: random.Random) -> None:
    # Newcomers alone could take every claim, so the old tenant's share shrinks
    # as the rotation grows, as in any fair order. What never happens: a tenant
    # that joined after the old one's last claim going before its next one; so
    # each wait is bounded by the members already there at that claim.
    q = TwoLevelQueue()
    q.add("old/0", "old", tenant_weight=w_old, events=BACKLOG)
    q.add("other/0", "other", tenant_weight=rng.randint(1, 5), events=BACKLOG)
    joined: dict[str, int] = {}  # newcomer -> the number of claims made before it joined
    bound, since, last_old, gaps = 0.0, 0, 0, []
    for n in range(1, 401):
        tenant = q.flows[q.step()].tenant
        if tenant == "old":
            assert since <= bound
            gaps.append(since)
            members = {name: t.weight for name, t in q.tenants.items() if t.pass_ is not None}
            bound, since, last_old = wait_bound(members, "old"), 0, n
        else:
            since += 1
            assert joined.get(tenant, -1) < last_old  # joined after old's last claim: behind it
        joined[f"new{n}"] = n
        q.add(f"new{n}/0", f"new{n}", tenant_weight=rng.randint(1, 5))
        q.add(f"old/{n}", "old", events=1)  # and a new flow in the old tenant
    assert len(gaps) >= 5


def test_new_flows_every_claim_never_starve_an_old_flow_in_the_same_tenant() -> None:
    q = TwoLevelQueue()
    q.add("A/old", "A", events=BACKLOG)
    joined: dict[str, int] = {}
    bound, since, last_old, gaps = 0.0, 0, 0, []
    for n in range(1, 401):
        flow = q.step()
        if flow == "A/old":
            assert since <= bound
            gaps.append(since)
            members = {f: q.flows[f].weight for f in q.flows if q.flows[f].waiting}
            bound, since, last_old = wait_bound(members, "A/old"), 0, n
        else:
            since += 1
            assert joined[flow] < last_old
        joined[f"A/new{n}"] = n
        q.add(f"A/new{n}", "A", weight=5)
    assert len(gaps) >= 10


# -- the token bucket ----------------------------------------------------------------------


def test_a_bucket_refills_rate_tokens_per_second_up_to_burst() -> None:
    b = Bucket(0, 1_000)
    assert b.level(1_250, 4, 3) == 1_000  # 4/s: one token per 250 ms
    assert b.level(9_999, 4, 3) // MILLI == 3  # never a whole token over burst
    assert b.take(1_249, 4, 3) is None and b.ready_at(1_249, 4, 3) == 1_250
    assert b.take(1_250, 4, 3) == Bucket(0, 1_250)


def test_a_full_bucket_keeps_the_part_of_a_token_earned_in_the_millisecond_it_filled() -> None:
    # 37/s: a token every 27.03 ms. Taken at 28 ms, 0.036 of the next is kept,
    # so claims on whole milliseconds still average 37 a second.
    b = Bucket.full(1, 0).take(0, 37, 1)
    assert b is not None and b.level(28, 37, 1) == 1_036
    assert b.take(28, 37, 1) == Bucket(36, 28)


def test_rate_zero_is_no_limit_and_a_rate_needs_a_burst_it_can_reach() -> None:
    assert Bucket(0, 0).take(5, 0, 0) == Bucket(0, 0)
    assert blocked_by(5, inflight=0, max_inflight=0, bucket=Bucket(0, 5), rate=0, burst=0) is None
    for rate, burst, field in [(3, 0, "burst"), (-1, 1, "rate"), (2_001, 2, "burst")]:
        with pytest.raises(InvalidInput) as bad:
            Bucket(0, 0).take(5, rate, burst)
        assert bad.value.field == field


def test_max_inflight_zero_is_no_limit() -> None:
    assert not at_cap(10**6, 0)
    assert at_cap(2, 2) and not at_cap(1, 2)
    assert blocked_by(0, inflight=2, max_inflight=2, bucket=None, rate=0, burst=1,
                      lease_end_ms=700) == Blocked(Limit.MAX_INFLIGHT, 700)


RATES = st.integers(1, 20).flatmap(lambda burst: st.tuples(st.integers(1, 1_000 * burst), st.just(burst)))
MOVES = st.lists(st.tuples(st.integers(-2_000, 3_000), st.booleans()), max_size=200)


@PROPERTY
@given(RATES, MOVES)
def test_a_bucket_never_holds_burst_plus_one_tokens_nor_gains_from_a_clock_going_back(
        limits: tuple[int, int], moves: list[tuple[int, bool]]) -> None:
    rate, burst = limits
    now, b = 0, Bucket.full(burst, 0)
    for dt, taking in moves:
        before = b.level(max(now, b.at_ms), rate, burst)
        now += dt
        held = b.level(now, rate, burst)
        assert 0 <= held < (burst + 1) * MILLI
        if dt < 0:
            assert held <= before  # the clock went back: nothing added
        assert b.level(now + 1, rate, burst) >= held  # monotone in time
        ready = b.ready_at(now, rate, burst)
        assert ready >= now and b.level(ready, rate, burst) >= MILLI
        assert ready == now or b.level(ready - 1, rate, burst) < MILLI  # the earliest
        if taking:
            after = b.take(now, rate, burst)
            assert (after is None) == (held < MILLI)
            b = b if after is None else after


def most_in_any_window(times: list[int], rate: int) -> float:
    """The largest (claims in [t_a, t_b]) - rate * (t_b - t_a) / 1000 over the claim times."""
    worst, low = 0.0, float("inf")
    for i, t in enumerate(times):
        low = min(low, i - rate * t / MILLI)
        worst = max(worst, i + 1 - rate * t / MILLI - low)
    return worst


@PROPERTY
@given(RATES, st.integers(1, 300_000), st.integers(1, 5_000))
def test_over_any_run_claims_follow_the_rate_within_one_token(limits: tuple[int, int], span_ms: int,
                                                              step_ms: int) -> None:
    # An eager taker (at every ready time) gets exactly burst + rate * t, rounded
    # down; one trying every step_ms never more; in any window either gets at
    # most burst + rate * window, plus less than one.
    rate, burst = limits
    b, now, eager = Bucket.full(burst, 0), 0, list[int]()
    while (now := b.ready_at(now, rate, burst)) <= span_ms and len(eager) < 3_000:
        b = b.take(now, rate, burst) or b
        eager.append(now)
    if len(eager) < 3_000:
        assert len(eager) == burst + rate * span_ms // MILLI
    b, sampled = Bucket.full(burst, 0), list[int]()
    for now in range(0, span_ms + 1, step_ms):
        after = b.take(now, rate, burst)
        b, sampled = (b, sampled) if after is None else (after, sampled + [now])
    assert len(sampled) <= burst + rate * span_ms / MILLI
    for times in (eager, sampled):
        assert most_in_any_window(times, rate) < burst + 1
