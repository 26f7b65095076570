"""`bench.vs_redis.summary`: the ratio to quote from several rounds of one cell; `latency_histogram`."""

from __future__ import annotations

from bench.vs_redis import Result, latency_histogram, summary


def result(system: str, round_: int, msgs_per_s: float, p99_ms: float, p50_ms: float = 0.0) -> Result:
    return Result(
        system, 1024, 1, 1, round=round_, messages=int(msgs_per_s), elapsed_s=1.0, p50_ms=p50_ms, p99_ms=p99_ms
    )


def test_each_round_is_compared_with_redis_in_the_same_round_and_the_median_is_quoted():
    cell = [
        result("redis P+1R", 1, 2000, 1.0),
        result("rocketstore SYNC/SYNC remoting", 1, 500, 4.0),
        result("redis P+1R", 2, 1000, 2.0),  # a slow round for both: the ratio holds
        result("rocketstore SYNC/SYNC remoting", 2, 400, 4.0),
        result("redis P+1R", 3, 2000, 1.0),
        result("rocketstore SYNC/SYNC remoting", 3, 600, 3.0),
    ]
    [line] = summary(cell)
    assert "rocketstore SYNC/SYNC remoting" in line and "over 3 rounds" in line
    assert "throughput 0.30x (0.25-0.40) of Redis" in line  # 0.25, 0.40, 0.30
    assert "p99 3.00x (2.00-4.00)" in line  # 4.0, 2.0, 3.0


def test_each_system_gets_its_own_line_and_an_even_number_of_rounds_takes_the_mean_of_the_middle_two():
    cell = [
        result("redis P+1R", 1, 1000, 1.0),
        result("rocketstore SYNC/SYNC remoting", 1, 300, 2.0),
        result("rocketstore SYNC/SYNC grpc", 1, 100, 5.0),
        result("redis P+1R", 2, 1000, 1.0),
        result("rocketstore SYNC/SYNC remoting", 2, 500, 2.0),
        result("rocketstore SYNC/SYNC grpc", 2, 100, 5.0),
    ]
    remoting, grpc = summary(cell)
    assert "remoting" in remoting and "throughput 0.40x (0.30-0.50)" in remoting
    assert "grpc" in grpc and "throughput 0.10x (0.10-0.10)" in grpc


def test_latency_histogram_counts_each_latency_in_the_first_bucket_that_holds_it():
    # Bounds 0.25, 0.35, 0.5, 0.71, 1.0, 1.41, 2.0 ... 45.25 ms; a bound belongs to its bucket.
    text = latency_histogram([0.1, 0.25, 0.3, 1.0, 1.9, 2.0, 2.01, 60.0, 90.0])
    assert text == "<=0.25:2 <=0.35:1 <=1:1 <=2:2 <=2.8:1 >45:2"
    assert latency_histogram([]) == ""


def test_sync_sync_p50_is_set_against_the_slower_single_guarantee_mode_of_the_same_round():
    cell = []
    # (SYNC/SYNC, ASYNC/SYNC, SYNC/ASYNC) p50s per round: the slower single mode differs by round.
    for round_, (both, flush_only, slave_only) in enumerate([(1.2, 1.0, 0.8), (1.5, 0.9, 1.0), (1.1, 1.1, 1.0)], 1):
        cell += [
            result("redis P+1R", round_, 1000, 1.0, 0.5),
            result("rocketstore SYNC/SYNC remoting", round_, 500, 2.0, both),
            result("rocketstore ASYNC/SYNC remoting", round_, 600, 2.0, flush_only),
            result("rocketstore SYNC/ASYNC remoting", round_, 600, 2.0, slave_only),
            result("rocketstore SYNC/SYNC grpc", round_, 300, 3.0, 2.0),
        ]
    lines = summary(cell)
    [overlap] = [line for line in lines if "slower of ASYNC/SYNC and SYNC/ASYNC" in line]
    assert "1.20x (1.00-1.50)" in overlap  # 1.2/1.0, 1.5/1.0, 1.1/1.1
    assert lines.index(overlap) == 1  # right under its SYNC/SYNC line; grpc ran no single modes


def test_a_system_run_without_the_event_engine_is_set_against_the_floor_run_the_same_way():
    cell = []
    for round_ in (1, 2):
        cell += [
            result("redis P+1R", round_, 1000, 1.0, 0.5),
            result("rocketstore SYNC/SYNC remoting", round_, 400, 2.0, 1.0),
            result("rocketstore ASYNC/SYNC remoting", round_, 500, 2.0, 1.0),
            result("rocketstore SYNC/ASYNC remoting", round_, 500, 2.0, 1.0),
            result("rocketstore SYNC/SYNC remoting noEE", round_, 450, 2.0, 1.0),
            result("floor: replicated", round_, 500, 1.0),
            result("floor: replicated noEE", round_, 900, 1.0),
        ]
    lines = summary(cell)
    default = lines.index(next(line for line in lines if "remoting over" in line))
    assert "of its floor: throughput 0.80x (0.80-0.80)" in lines[default + 1]  # 400 / 500
    no_ee = lines.index(next(line for line in lines if "remoting noEE over" in line))
    assert "of its floor: throughput 0.50x (0.50-0.50)" in lines[no_ee + 1]  # 450 / 900, not 450 / 500
    # Each round's faster floor is the bar for both: 400 / 900 and 450 / 900.
    assert "of the faster floor: throughput 0.44x (0.44-0.44)" in lines[default + 2]
    assert "of the faster floor: throughput 0.50x (0.50-0.50)" in lines[no_ee + 2]
    # The single-guarantee modes ran with the EventEngine: no overlap line for the noEE system.
    assert not any("slower of" in line for line in lines[no_ee:])
    assert sum("slower of" in line for line in lines) == 1


def test_remoting_is_also_set_against_the_floor_doing_the_brokers_work_of_the_same_round():
    cell = []
    for round_, (broker, work) in enumerate([(400, 500), (300, 400), (450, 450)], 1):
        cell += [
            result("redis P+1R", round_, 1000, 1.0),
            result("rocketstore SYNC/SYNC remoting", round_, broker, 2.0),
            result("rocketstore SYNC/SYNC grpc", round_, 200, 2.0),
            result("floor: replicated", round_, 800, 1.0),
            result("floor: replicated-work", round_, work, 4.0),
        ]
    lines = summary(cell)
    remoting = lines.index(next(line for line in lines if "remoting over" in line))
    assert "of its floor: throughput 0.50x (0.38-0.56)" in lines[remoting + 1]  # 400, 300, 450 / 800
    # 400 / 500, 300 / 400, 450 / 450; p99 2.0 / 4.0 each round.
    assert "of the floor with its work: throughput 0.80x (0.75-1.00), p99 0.50x" in lines[remoting + 2]
    # The gRPC API's work floor did not run: no such line for it.
    assert not any("with its work" in line for line in lines[remoting + 3 :])
