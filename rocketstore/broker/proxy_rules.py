"""Proxy mode's decision: which client API calls a broker relays to its group's master, and where.

A slave refuses the calls only a master serves (NOT_MASTER); with proxy mode on it relays them to
its group's master instead, so an official RocketMQ 5 client connected to any member of a group
keeps working through a failover (`proxy_forwarder.py` carries the calls). The methods, by what a
slave does with them today:

- writes a slave refuses NOT_MASTER: SendMessage, EndTransaction, UpdateOffset;
- pop consumption, which a slave serves only while it acts for its master that is down
  (`RoleGate.read_refusal`): QueryAssignment, ReceiveMessage, AckMessage, ChangeInvisibleDuration,
  ForwardMessageToDeadLetterQueue; relayed unless this slave acts for its master;
- the client's session where the master keeps state for it: Telemetry (the master's transaction
  check-backs reach a producer over it, `telemetry.py`) and NotifyClientTermination (the master
  releases the client's pop deliveries); relayed unless this slave acts for its master.

Everything else stays local: reads a slave serves (QueryRoute, PullMessage, GetOffset,
QueryOffset), Heartbeat (a slave answers it), and the admin API. A master, fenced or not, serves
its own calls (a fenced master answers FENCED, which the clients retry). A call that was already
relayed once (it carries `FORWARDED_HEADER`) is never relayed again: two brokers that each take the
other for the master answer NOT_MASTER instead of passing a call back and forth.

Sans-IO: plain values in, a target endpoint (or None) out. Thread-safety: pure functions.
"""

from __future__ import annotations

from dataclasses import dataclass

# Set on a relayed call: the broker it reaches serves it whatever it is.
FORWARDED_HEADER = "x-rocketstore-forwarded"

MASTER_WRITES = frozenset(("SendMessage", "EndTransaction", "UpdateOffset"))
POP_CALLS = frozenset(
    ("QueryAssignment", "ReceiveMessage", "AckMessage", "ChangeInvisibleDuration", "ForwardMessageToDeadLetterQueue")
)
SESSION_CALLS = frozenset(("Telemetry", "NotifyClientTermination"))
RELAYED = MASTER_WRITES | POP_CALLS | SESSION_CALLS


@dataclass(frozen=True, slots=True)
class Standing:
    """What the decision needs of this broker's role, read once per call."""

    is_slave: bool
    acting_master: bool  # a slave serving pop reads while its master is down
    own_endpoint: str
    master_endpoint: str  # "" when this broker knows no master


def relay_target(method: str, standing: Standing, *, already_relayed: bool) -> str | None:
    """The client endpoint to relay the call `method` to; None: serve it here."""
    if already_relayed or not standing.is_slave or method not in RELAYED:
        return None
    master = standing.master_endpoint
    if not master or master == standing.own_endpoint:
        # No master known (an election under way) or this broker stands for it: the local answer
        # (NOT_MASTER, which clients retry, or the acting slave's service) is the right one.
        return None
    if standing.acting_master and method not in MASTER_WRITES:
        return None
    return master
