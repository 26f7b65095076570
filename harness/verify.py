"""Checks on stopped brokers' stores after failovers (tests, the failover benchmark, operators):
is every acknowledged message in the master's CommitLog at the offset its acknowledgement gave,
and are the replicas byte-identical up to the confirmed offset?

Opens each store as the broker would (recovery runs), so call these only on stopped brokers.
Thread-safety: none needed; each call works on its own stores.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from store import MessageStore, StoreConfig
from store.message import PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX

COMPARE_STEP = 64 * 1024


def open_store(store_dir: Path, settings: Mapping[str, str]) -> MessageStore:
    """A stopped broker's store, loaded for reading; `settings` are its broker.conf keys (for
    the segment sizes). The caller shuts it down."""
    config = StoreConfig.from_properties({**settings, "storePathRootDir": str(store_dir)})[0]
    store = MessageStore(config)
    store.load()
    return store


def messages_by_offset(store: MessageStore) -> dict[int, str]:
    """CommitLog offset -> the client's message id (UNIQ_KEY, else the broker's msgId)."""
    return {
        m.physical_offset: m.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, m.msg_id)
        for m in store.iter_messages()
    }


def missing_acknowledged(acked: Mapping[str, int], log: Mapping[int, str]) -> list[str]:
    """Acknowledged messages (id -> offset) not in `log` at that offset, as "id@offset"."""
    return [f"{mid}@{offset}" for mid, offset in acked.items() if log.get(offset) != mid]


def first_difference(stores: list[MessageStore], upto: int) -> int | None:
    """The first CommitLog offset below `upto` at which the stores' bytes differ (or one of them
    has none); None when they agree on everything they all hold from the highest min offset."""
    offset = max(s.min_offset for s in stores)
    while offset < upto:
        chunks = [s.commit_log_data(offset, min(COMPARE_STEP, upto - offset)) for s in stores]
        size = min(len(c) for c in chunks)
        if size == 0:
            return offset
        chunks = [c[:size] for c in chunks]
        if any(c != chunks[0] for c in chunks[1:]):
            return offset + next(i for i in range(size) if any(c[i] != chunks[0][i] for c in chunks[1:]))
        offset += size
    return None
