"""`bench.put_switches --gc`: the collector passes of a round and the slowest publishes under way
during one."""

from __future__ import annotations

from bench.put_switches import _gc_passes, _print_gc


def test_passes_of_a_round_are_read_from_the_log_and_lined_up_with_the_slowest_publishes(tmp_path, capsys):
    (tmp_path / "42.log").write_text(
        "99.000000 0.010000 2\n"  # before the round
        "100.500000 0.004000 0\n"
        "101.000000 0.001000 1\n"
        "101.200000 0.0005"  # a line cut short by the broker's exit
    )
    passes = _gc_passes(tmp_path, 42, since=100.0, until=102.0)
    assert passes == [(100.5, 0.004, 0), (101.0, 0.001, 1)]
    assert _gc_passes(tmp_path, 7, 0.0, 1e12) == []  # a broker that never collected

    # 200 publishes of 1 ms, two of them slow: the slowest 1% are those two, and one of them was
    # under way during the young pass at 100.5 s.
    timeline = [(100.0 + i / 1000, 1.0) for i in range(198)] + [(100.49, 20.0), (101.5, 30.0)]
    _print_gc("master", passes, timeline)
    out = capsys.readouterr().out
    assert "gen0 1 (4.0 ms, longest 4.00)" in out and "gen1 1 (1.0 ms, longest 1.00)" in out
    assert "gen2 0 (0.0 ms" in out
    assert "slowest 1% under way during one: 1/2" in out
