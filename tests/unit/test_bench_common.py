"""`bench.common.percentile`: the one percentile every benchmark prints its latencies with."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bench.common import percentile


def test_the_index_is_the_floor_of_the_rank_and_the_top_percentile_is_the_largest():
    ordered = [float(v) for v in range(1, 101)]  # 1..100
    assert percentile(ordered, 50) == 51.0  # index 50
    assert percentile(ordered, 99) == 100.0  # index 99
    assert percentile(ordered, 100) == 100.0  # clamped to the last
    assert percentile(ordered, 0) == 1.0


def test_no_values_print_as_zero():
    assert percentile([], 50) == 0.0


@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1), st.floats(0, 100), st.floats(0, 100))
def test_a_percentile_is_one_of_the_values_and_grows_with_p(values, p, q):
    ordered = sorted(values)
    low, high = sorted((p, q))
    assert percentile(ordered, low) in ordered
    assert percentile(ordered, low) <= percentile(ordered, high)
