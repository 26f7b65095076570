"""The broker's collector settings (rocketstore/broker/heap.py): what the started broker holds is
frozen out of later collections, is still freed by reference counting, and young collections come
at the configured threshold."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from rocketstore.broker import heap


class Table:
    """A long-lived object the collector tracks (instances of Python classes are)."""


@pytest.fixture
def restored_collector() -> Iterator[None]:
    thresholds = gc.get_threshold()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)


@pytest.mark.usefixtures("restored_collector")
def test_settle_freezes_what_is_held_and_sets_the_thresholds() -> None:
    held = Table()
    assert any(obj is held for obj in gc.get_objects())
    frozen = heap.settle(heap.CollectorThresholds(young_allocations=12_345, young_collections=7, middle_collections=9))
    assert frozen > 0 and gc.get_freeze_count() > 0
    assert gc.get_threshold() == (12_345, 7, 9)
    # The permanent generation is outside every generation a collection (or get_objects) walks.
    assert not any(obj is held for obj in gc.get_objects())
    made_after = Table()
    assert any(obj is made_after for obj in gc.get_objects())


@pytest.mark.usefixtures("restored_collector")
def test_a_frozen_object_is_still_freed_when_let_go() -> None:
    held = Table()
    gone = weakref.ref(held)
    heap.settle()
    del held
    assert gone() is None
