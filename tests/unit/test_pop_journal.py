"""The pop journal of a slave serving reads: lines survive, a torn last line is ignored and cut off,
a drop keeps the rest."""

from __future__ import annotations

from store.pop.pop_journal import PopJournal
from store.pop.pop_state import Acked, Delivered

KEY = ("g", "T", 0)
D0 = Delivered(KEY, 0, 0, 1, 1, 5_000)
A0 = Acked(KEY, 0, 0, 1)
D1 = Delivered(KEY, 0, 1, 1, 2, 5_000)


def test_batches_come_back_in_order_and_a_drop_keeps_the_rest(tmp_path):
    journal = PopJournal(tmp_path)
    journal.append([D0])
    journal.append([A0, D1])
    assert journal.events() == [D0, A0, D1] and len(journal.batches()) == 2
    before = journal.generation
    journal.drop(1)
    assert journal.events() == [A0, D1] and journal.generation == before + 1
    assert PopJournal(tmp_path).events() == [A0, D1]  # on disk, not only in memory
    journal.drop(1)
    assert not journal.path.exists() and journal.events() == []


def test_a_torn_last_line_is_ignored_and_cut_off_by_the_next_append(tmp_path):
    PopJournal(tmp_path).append([D0])
    with open(tmp_path / "pop_journal", "ab") as torn:
        torn.write(b'[{"k":"A"')  # a crash in the middle of an append
    reopened = PopJournal(tmp_path)
    assert reopened.events() == [D0]
    reopened.append([D1])
    assert reopened.events() == [D0, D1]
    assert (tmp_path / "pop_journal").read_bytes().count(b"\n") == 2
