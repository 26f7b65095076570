"""`RecentIds` (store/log/recent_ids.py): the producer ids of the last messages stored, the first
store of a key winning, the oldest forgotten past the capacity; `add_many` is `add` in turn."""

from __future__ import annotations

from collections import OrderedDict

from hypothesis import given
from hypothesis import strategies as st

from store.log import recent_ids
from store.log.recent_ids import Landed, RecentIds

landings = st.lists(
    st.tuples(
        st.sampled_from(["orders", "%RETRY%g"]),
        st.sampled_from([f"K{i}" for i in range(12)]),
        st.builds(Landed, st.integers(0, 10**9), st.integers(1, 4096), st.integers(0, 10**6), st.integers(0, 2**41)),
    ),
    max_size=40,
)


def contents(recent: RecentIds) -> list[tuple[tuple[str, str], Landed]]:
    return list(recent._entries.items())


@given(first=landings, then=landings, capacity=st.integers(0, 16))
def test_add_many_keeps_what_adding_one_at_a_time_keeps(
    first: list[tuple[str, str, Landed]], then: list[tuple[str, str, Landed]], capacity: int
) -> None:
    one_by_one, together = RecentIds(capacity), RecentIds(capacity)
    for batch in (first, then):
        for topic, key, landed in batch:
            one_by_one.add(topic, key, landed)
        together.add_many(batch)
    assert contents(together) == contents(one_by_one)
    assert len(together) <= capacity


def test_the_first_store_of_a_key_wins_and_the_oldest_goes_first() -> None:
    recent = RecentIds(2)
    a, b, c = Landed(0, 10, 0, 1), Landed(10, 10, 1, 2), Landed(20, 10, 2, 3)
    recent.add_many([("t", "A", a), ("t", "A", b), ("t", "B", b)])
    assert recent.get("t", "A") == a and recent.get("t", "B") == b
    recent.add_many(iter([("t", "C", c)]))
    assert recent.get("t", "A") is None
    assert (recent.get("t", "B"), recent.get("t", "C")) == (b, c)


@given(first=landings, then=landings, capacity=st.integers(0, 16))
def test_add_run_keeps_what_add_many_keeps(
    first: list[tuple[str, str, Landed]], then: list[tuple[str, str, Landed]], capacity: int
) -> None:
    by_many, by_run = RecentIds(capacity), RecentIds(capacity)
    for batch in (first, then):
        run = [(key, landed) for topic, key, landed in batch if topic == "orders"]
        by_many.add_many([("orders", key, landed) for key, landed in run])
        by_run.add_run("orders", [key for key, _ in run], iter([landed for _, landed in run]))
    assert contents(by_run) == contents(by_many)
    assert len(by_run) <= capacity


def test_the_oldest_are_forgotten_across_many_batches_and_after_a_cut() -> None:
    recent = RecentIds(1000)
    for n in range(100):
        recent.add_run("t", [f"K{n}-{i}" for i in range(32)], [Landed(n * 32 + i, 1, n * 32 + i, 0) for i in range(32)])
    assert len(recent) == 1000
    assert recent.get("t", "K68-23") is None and recent.get("t", "K68-24") == Landed(68 * 32 + 24, 1, 68 * 32 + 24, 0)
    recent.forget_from(3000)
    assert len(recent) == 3000 - (3200 - 1000) and recent.get("t", "K93-24") is None
    recent.add_run("t", [f"L{i}" for i in range(500)], [Landed(3000 + i, 1, 0, 0) for i in range(500)])
    assert len(recent) == 1000 and recent.get("t", "K68-24") is None and recent.get("t", "K85-0") is not None


class _Model:
    """What RecentIds keeps, the plain way: an OrderedDict, the first store of a key winning."""

    def __init__(self, capacity: int) -> None:
        self.capacity, self.entries = capacity, OrderedDict()

    def add(self, topic: str, key: str, landed: Landed) -> None:
        if self.capacity and (topic, key) not in self.entries:
            self.entries[(topic, key)] = landed
            if len(self.entries) > self.capacity:
                self.entries.popitem(last=False)


calls = st.lists(st.tuples(st.sampled_from(["add", "add_many", "add_run", "forget_from"]), landings), max_size=30)


@given(steps=calls, capacity=st.integers(0, 16), chunk=st.integers(1, 5))
def test_any_mix_of_adds_and_cuts_keeps_what_adding_one_at_a_time_keeps(steps, capacity, chunk) -> None:
    """Small chunks of the insertion order, so that adds and evictions cross many of them."""
    saved, recent_ids._CHUNK = recent_ids._CHUNK, chunk
    try:
        recent, model = RecentIds(capacity), _Model(capacity)
        for call, batch in steps:
            if call == "forget_from":
                cut = batch[0][2].wrote_offset if batch else 0
                recent.forget_from(cut)
                model.entries = OrderedDict((k, v) for k, v in model.entries.items() if v.wrote_offset < cut)
                continue
            if call == "add":
                for landing in batch:
                    recent.add(*landing)
            elif call == "add_many":
                recent.add_many(batch)
            else:
                batch = [landing for landing in batch if landing[0] == "orders"]
                recent.add_run("orders", [key for _, key, _ in batch], [landed for _, _, landed in batch])
            for landing in batch:
                model.add(*landing)
            assert contents(recent) == list(model.entries.items())
    finally:
        recent_ids._CHUNK = saved
