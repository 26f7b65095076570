"""Controller mode's decisions, sans-IO: elections, the in-sync replica set, and the lease fence.

`decide(view, me, ...)` reads one snapshot of the group in etcd (`GroupView`) and says what
this broker does next:

- a master key exists: LEAD (it names this broker) or FOLLOW it;
- no master: DECLARE (publish this broker's max offset as a candidate of the group's current
  epoch) until its declaration is in etcd; then, once every live in-sync broker has declared (or
  `declare_wait_ms` passed since the master vanished), the best declared in-sync candidate
  CAMPAIGNs: a planned switchover's `handover_to` first, else the highest max offset (lowest
  broker id on a tie). Everyone else WAITs. Only members of `state.isr` are eligible: each holds
  every acknowledged message, so whichever wins loses nothing that was acknowledged; the highest
  offset merely loses the fewest unacknowledged ones. The campaign is one etcd transaction
  (state unchanged, master absent): of several campaigns for one epoch exactly one succeeds.
  With no live in-sync broker, `enableElectUncleanMaster` lets any declared broker win and
  records how many bytes may be lost; without it the group waits.
- A new group (no state in etcd) elects among every registered broker.

`isr_changes(...)` is the master's rule for its in-sync set: a slave joins once it is caught up
(the tracker re-checks under its lock that it holds everything acknowledged before the
transaction is sent); a member leaves when it disconnects, or has not caught up or not reported
for `haMaxTimeSlaveNotCatchup` (RocketMQ's rule: a slave counts as caught up when a report of
its says so, so a silent one stops counting even when nothing new was written).

`LeaseClock` is the fence: a master may acknowledge only while `valid(now)`, i.e. until the
send time of its last successful keepalive plus the TTL etcd granted, minus a margin. etcd starts
its TTL when it receives the keepalive, after it was sent, so the fence falls before the lease can
expire and no two masters ever both acknowledge. Time is a monotonic clock in ms, which keeps
running while a process is paused (SIGSTOP).

Plain objects; `LeaseClock` is not thread-safe on its own (the adapter locks around it).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .group_state import NO_BROKER, BrokerRecord, GroupState, MasterRecord

# A slave this close to the master (time since it last held everything) is offered a seat.
JOIN_LAG_MS = 500


class Action(enum.Enum):
    LEAD = "LEAD"
    FOLLOW = "FOLLOW"
    DECLARE = "DECLARE"
    CAMPAIGN = "CAMPAIGN"
    WAIT = "WAIT"


@dataclass(frozen=True, slots=True)
class GroupView:
    master: MasterRecord | None
    state: GroupState | None
    # The state key's mod revision (0: absent): a campaign's transaction compares it.
    state_revision: int
    brokers: Mapping[int, BrokerRecord]


@dataclass(frozen=True, slots=True)
class Decision:
    action: Action
    reason: str = ""
    master: MasterRecord | None = None
    # CAMPAIGN: the state to write; DECLARE: the group epoch to declare for.
    new_state: GroupState | None = None
    declare_epoch: int = -1

    def __post_init__(self) -> None:
        if self.action in (Action.LEAD, Action.FOLLOW) and self.master is None:
            raise ValueError(f"{self.action.name} needs the master it names")
        if self.action is Action.CAMPAIGN and self.new_state is None:
            raise ValueError("CAMPAIGN needs the state it writes")


def decide(
    view: GroupView,
    me: BrokerRecord,
    *,
    now_ms: int,
    no_master_since_ms: int,
    declare_wait_ms: int,
    unclean_allowed: bool,
) -> Decision:
    """`me` is this broker's record as it would publish it now (fresh max offset and epoch)."""
    if view.master is not None:
        if view.master.broker_id == me.broker_id:
            return Decision(Action.LEAD, "this broker holds the master key", master=view.master)
        return Decision(Action.FOLLOW, f"broker {view.master.broker_id} is master", master=view.master)
    state = view.state
    group_epoch = state.epoch if state is not None else 0
    published = view.brokers.get(me.broker_id)
    if published is None or published.candidate_epoch != group_epoch or published.max_offset != me.max_offset:
        return Decision(Action.DECLARE, f"no master: offering max offset {me.max_offset}", declare_epoch=group_epoch)
    alive = view.brokers
    eligible = {i: r for i, r in alive.items() if state is None or i in state.isr}
    unclean = False
    if not eligible:
        if not unclean_allowed:
            members = sorted(state.isr) if state is not None else []
            return Decision(
                Action.WAIT,
                f"no in-sync broker {members} is alive and enableElectUncleanMaster is false",
            )
        eligible = dict(alive)
        unclean = True
    declared = {i: r for i, r in eligible.items() if r.candidate_epoch == group_epoch}
    waited = now_ms - no_master_since_ms
    if len(declared) < len(eligible) and waited < declare_wait_ms:
        missing = sorted(set(eligible) - set(declared))
        return Decision(Action.WAIT, f"waiting for the declarations of brokers {missing}")
    if not declared:
        return Decision(Action.WAIT, "no candidate has declared yet")
    winner = _best(declared, state.handover_to if state is not None else NO_BROKER)
    if winner.broker_id != me.broker_id:
        return Decision(Action.WAIT, f"broker {winner.broker_id} (max offset {winner.max_offset}) should win")
    highest_epoch = max([group_epoch, me.last_epoch, *(r.last_epoch for r in alive.values())])
    lost = 0
    if unclean:
        known = [r.max_offset for r in alive.values()]
        if state is not None:
            known.append(state.master_max_offset)
        lost = max(0, max(known) - me.max_offset)
    new_state = GroupState(
        epoch=highest_epoch + 1,
        master_id=me.broker_id,
        isr=frozenset({me.broker_id}),
        master_max_offset=me.max_offset,
        unclean_lost_bytes=lost,
    )
    kind = "unclean election" if unclean else "election"
    return Decision(Action.CAMPAIGN, f"{kind} for epoch {new_state.epoch}", new_state=new_state)


def _best(candidates: Mapping[int, BrokerRecord], preferred: int) -> BrokerRecord:
    if preferred in candidates:
        return candidates[preferred]
    return max(candidates.values(), key=lambda r: (r.max_offset, -r.broker_id))


@dataclass(frozen=True, slots=True)
class ReplicaProgress:
    broker_id: int
    ack_offset: int
    lag_bytes: int
    lag_ms: int
    silent_ms: int = 0  # since the slave's last report


def keeps_up(progress: ReplicaProgress, max_time_not_catchup_ms: int) -> bool:
    """Whether an in-sync slave stays in the set: it caught up within the limit and reported
    within it. Reports go out at least every haSendHeartbeatInterval, which the config keeps
    well below the limit, so only a stopped or cut-off slave goes silent that long. Without the
    second test a paused slave that holds everything would count as caught up for as long as
    nothing new is written, and stay in the set until its stream is closed."""
    return progress.lag_ms <= max_time_not_catchup_ms and progress.silent_ms <= max_time_not_catchup_ms


@dataclass(frozen=True, slots=True)
class IsrChanges:
    joins: frozenset[int]
    leaves: frozenset[int]

    def __bool__(self) -> bool:
        return bool(self.joins or self.leaves)


def isr_changes(
    isr: frozenset[int], master_id: int, connected: Sequence[ReplicaProgress], *, max_time_not_catchup_ms: int
) -> IsrChanges:
    """What should change in the master's in-sync set, given its connected slaves."""
    by_id = {p.broker_id: p for p in connected}
    leaves = frozenset(
        i for i in isr if i != master_id and (i not in by_id or not keeps_up(by_id[i], max_time_not_catchup_ms))
    )
    joins = frozenset(
        p.broker_id
        for p in connected
        if p.broker_id not in isr
        and (p.lag_bytes == 0 or p.lag_ms <= JOIN_LAG_MS)
        and p.silent_ms <= max_time_not_catchup_ms
    )
    return IsrChanges(joins, leaves)


class LeaseClock:
    """When a master's lease permits it to acknowledge writes (monotonic ms)."""

    def __init__(self, margin_ms: int) -> None:
        if margin_ms < 0:
            raise ValueError(f"the fence margin must not be negative, got {margin_ms}")
        self.margin_ms = margin_ms
        self.valid_until_ms = 0

    def renewed(self, sent_at_ms: int, ttl_s: int) -> None:
        """A keepalive (or grant) sent at `sent_at_ms` was answered with `ttl_s` seconds."""
        if ttl_s <= 0:
            self.lost()
            return
        self.valid_until_ms = max(self.valid_until_ms, sent_at_ms + ttl_s * 1000 - self.margin_ms)

    def lost(self) -> None:
        self.valid_until_ms = 0

    def valid(self, now_ms: int) -> bool:
        return now_ms < self.valid_until_ms

    def remaining_ms(self, now_ms: int) -> int:
        return max(0, self.valid_until_ms - now_ms)
