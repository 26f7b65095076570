"""What a broker group keeps in etcd in controller mode: its key layout and the JSON records.

Keys, under `<etcdPrefix>/<brokerClusterName>/<brokerName>/`:

| key | value | lifetime |
|---|---|---|
| `master` | `MasterRecord`: broker id, epoch, client and replication endpoints | bound to the master's lease |
| `state` | `GroupState`: epoch, master id, in-sync ids, hints | permanent; changed by transactions on its revision |
| `brokers/<id>` | `BrokerRecord`: endpoints, offsets, last epoch, election declaration | bound to that broker's lease |

A master exists while its lease lives; `state.epoch` only grows, and each epoch is won by one
transaction (`state` unchanged since read and `master` absent), so an epoch number names one
master term for good. Values are compact JSON objects (UTF-8); unknown fields are ignored so that
later versions can add some. A value that is not such an object raises `GroupStateError`: etcd
holds garbage, which no decision may be built on.

Plain immutable values; thread-safe.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any, TypeVar

NO_BROKER = -1


class GroupStateError(ValueError):
    """A record in etcd cannot be decoded."""


@dataclass(frozen=True, slots=True)
class GroupKeys:
    prefix: str

    @classmethod
    def of(cls, etcd_prefix: str, cluster: str, broker_name: str) -> "GroupKeys":
        for what, name in (("brokerClusterName", cluster), ("brokerName", broker_name)):
            if not name or "/" in name:
                raise ValueError(f"{what} {name!r} cannot name an etcd key (empty or holds '/')")
        return cls(f"{etcd_prefix}/{cluster}/{broker_name}/")

    @property
    def master(self) -> str:
        return self.prefix + "master"

    @property
    def state(self) -> str:
        return self.prefix + "state"

    @property
    def brokers(self) -> str:
        return self.prefix + "brokers/"

    def broker(self, broker_id: int) -> str:
        return f"{self.brokers}{broker_id}"


@dataclass(frozen=True, slots=True)
class MasterRecord:
    broker_id: int
    epoch: int
    client_endpoint: str
    ha_endpoint: str


@dataclass(frozen=True, slots=True)
class GroupState:
    epoch: int = 0
    master_id: int = NO_BROKER
    # Broker ids holding every acknowledged message (the master included).
    isr: frozenset[int] = field(default_factory=frozenset)
    # The master's max offset when the state was last written (a hint for unclean elections).
    master_max_offset: int = 0
    # Bytes the last (unclean) election may have lost; 0 for a clean one.
    unclean_lost_bytes: int = 0
    # A planned switchover's chosen successor, preferred by the next election.
    handover_to: int = NO_BROKER


@dataclass(frozen=True, slots=True)
class BrokerRecord:
    broker_id: int
    client_endpoint: str
    ha_endpoint: str
    max_offset: int = 0
    # The epoch of the broker's last byte, and where that epoch starts in its log.
    last_epoch: int = 0
    last_epoch_start: int = 0
    # The group epoch in which the broker saw no master and offered itself with `max_offset`
    # (-1: not a candidate). Elections wait for the in-sync candidates' declarations.
    candidate_epoch: int = -1


Record = TypeVar("Record", MasterRecord, GroupState, BrokerRecord)


def encode(record: MasterRecord | GroupState | BrokerRecord) -> bytes:
    data = asdict(record)
    if isinstance(record, GroupState):
        data["isr"] = sorted(record.isr)
    return json.dumps(data, separators=(",", ":"), sort_keys=True).encode()


def decode(kind: type[Record], raw: bytes) -> Record:
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise GroupStateError(f"not a {kind.__name__}: {exc}") from None
    if not isinstance(data, dict):
        raise GroupStateError(f"not a {kind.__name__}: a JSON {type(data).__name__}")
    values: dict[str, Any] = {}
    for f in fields(kind):
        if f.name not in data:
            continue
        value = data[f.name]
        if f.name == "isr":
            if not isinstance(value, list) or not all(_is_int(v) for v in value):
                raise GroupStateError(f"{kind.__name__}.isr must be a list of broker ids, got {value!r}")
            value = frozenset(value)
        elif f.type in ("int", int):
            if not _is_int(value):
                raise GroupStateError(f"{kind.__name__}.{f.name} must be an integer, got {value!r}")
        elif not isinstance(value, str):
            raise GroupStateError(f"{kind.__name__}.{f.name} must be a string, got {value!r}")
        values[f.name] = value
    try:
        return kind(**values)
    except TypeError as exc:
        raise GroupStateError(f"incomplete {kind.__name__}: {exc}") from None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
