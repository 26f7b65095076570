"""ha/epochs.py and ha/epoch_file.py: histories, the consistent point, the crash-safe file."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ha.epoch_file import EpochFile, EpochFileCorrupt, decode, encode
from ha.epochs import EpochEntry, EpochHistory, consistent_point


def H(*pairs: tuple[int, int]) -> EpochHistory:
    return EpochHistory(EpochEntry(e, s) for e, s in pairs)


def test_history_rules_and_queries():
    h = H((1, 0), (3, 100), (4, 100), (7, 250))
    assert h.last_epoch == 7 and h.entry(3) == EpochEntry(3, 100) and h.entry(2) is None
    assert h.end_offset(1, 300) == 100 and h.end_offset(4, 300) == 250 and h.end_offset(7, 300) == 300
    assert h.epoch_at(0) == 1 and h.epoch_at(99) == 1 and h.epoch_at(100) == 4 and h.epoch_at(260) == 7
    assert H((5, 10)).epoch_at(9) is None
    assert h.before(250) == H((1, 0), (3, 100), (4, 100)) and h.before(100) == H((1, 0)) and len(h.before(0)) == 0
    assert h.with_entry(8, 250).last() == EpochEntry(8, 250)
    with pytest.raises(KeyError):
        h.end_offset(2, 300)
    for bad in (((2, 0), (2, 5)), ((2, 10), (3, 5)), ((-1, 0),)):
        with pytest.raises(ValueError):
            H(*bad)
    with pytest.raises(ValueError):
        h.with_entry(7, 300)


def test_consistent_point_examples():
    master = H((1, 0), (2, 120), (3, 400))
    assert consistent_point(H((1, 0)), 100, master, 500) == 100  # a lagging slave: nothing to cut
    assert consistent_point(H((1, 0), (2, 120)), 300, master, 500) == 300
    # A deposed master of epoch 2 that wrote past where epoch 3 took over.
    assert consistent_point(H((1, 0), (2, 120)), 450, master, 500) == 400
    # Its own epoch the others never saw: back to epoch 1's end in the master's log.
    assert consistent_point(H((1, 0), (5, 90)), 150, H((1, 0), (6, 80)), 200) == 80
    assert consistent_point(H((2, 0)), 10, H((1, 0)), 10) is None


@st.composite
def lineages(draw):
    """A true log: terms of random lengths. Two replicas each hold a prefix of it, and may have
    appended a tail in a later epoch of their own that nobody else received (a deposed master)."""
    lengths = draw(st.lists(st.integers(0, 50), min_size=1, max_size=6))
    starts = [sum(lengths[:i]) for i in range(len(lengths))]
    epochs = sorted(draw(st.lists(st.integers(1, 40), min_size=len(lengths), max_size=len(lengths), unique=True)))
    truth = [EpochEntry(e, s) for e, s in zip(epochs, starts)]
    total = sum(lengths)
    # Terms are unique in a group (an election makes each): two deposed masters never share one.
    used = {e.epoch for e in truth}

    def replica():
        end = draw(st.integers(0, total))
        entries = [e for e in truth if e.start_offset < end] or truth[:1]
        tail = draw(st.integers(0, 30))
        if tail and draw(st.booleans()):
            # A term of its own after `end`, numbered between the true epochs (not reused).
            own = draw(st.integers(entries[-1].epoch + 1, 100))
            if own not in used:
                used.add(own)
                return EpochHistory(entries + [EpochEntry(own, end)]), end + tail, end
        return EpochHistory(entries), end, end

    return replica(), replica()


@given(lineages())
def test_consistent_point_is_the_common_prefix_and_symmetric(pair):
    (a, a_max, a_true), (b, b_max, b_true) = pair
    point = consistent_point(a, a_max, b, b_max)
    assert point == consistent_point(b, b_max, a, a_max)
    # Both replicas start from the lineage's first term, so they always share an epoch.
    assert point == min(a_true, b_true)


def test_epoch_file_round_trip_and_backup(tmp_path):
    f = EpochFile(tmp_path / "epochFileCheckpoint")
    assert len(f.load()) == 0
    h = H((1, 0), (2, 4096))
    f.store(h)
    assert f.load() == h
    # A torn main file: the backup (same content) is used.
    f.path.write_bytes(encode(h)[:-5])
    assert f.load() == h
    f.backup.write_bytes(b"garbage")
    with pytest.raises(EpochFileCorrupt):
        f.load()


@given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 10**12)), max_size=5), st.data())
def test_no_prefix_or_corruption_of_a_file_decodes_as_valid(pairs, data):
    entries = sorted({e for e, _ in pairs})
    h = EpochHistory(EpochEntry(e, i * 10) for i, e in enumerate(entries))
    raw = encode(h)
    assert decode(raw) == h
    cut = data.draw(st.integers(0, len(raw) - 1))
    with pytest.raises(ValueError):
        decode(raw[:cut])
    pos = data.draw(st.integers(0, len(raw) - 2))
    flipped = bytearray(raw)
    flipped[pos] ^= data.draw(st.integers(1, 255))
    try:
        assert decode(bytes(flipped)) == h  # only a flip the format ignores may decode, to the same
    except ValueError:
        pass


def test_a_crash_between_the_backup_and_the_main_write_loads_old_or_new(tmp_path):
    f = EpochFile(tmp_path / "epochFileCheckpoint")
    old, new = H((1, 0)), H((1, 0), (2, 50))
    f.store(old)
    f.backup.write_bytes(encode(new))  # the crash: the backup is new, the main file still old
    assert f.load() in (old, new)
    f.path.write_bytes(encode(new)[:7])  # or the main file torn mid-rename's tmp copy
    assert f.load() == new
