"""client.report: a broker group's status as rows and as a table, and the text forms of answers
(column tables, permission bits, body previews). Pure functions; no sockets."""

from __future__ import annotations

from client import report


def _status(role: str, broker_id: int, endpoint: str, **extra):
    base = dict(
        cluster_name="C",
        broker_name="broker-a",
        broker_id=broker_id,
        role=role,
        epoch=0,
        client_endpoint=endpoint,
        max_offset=1000,
        flushed_offset=900,
        confirmed_offset=800,
        slaves=[],
        master_ha_address="",
        master_connected=False,
        master_max_offset=0,
    )
    return base | extra


def _snapshot(broker_id: int, endpoint: str, fit: bool = True):
    return dict(
        ha_peer=f"10.0.0.{broker_id}:40000",
        broker_id=broker_id,
        client_endpoint=endpoint,
        ack_offset=990,
        lag_bytes=10,
        lag_seconds=0.5,
        fit=fit,
        silent_ms=12_345 if broker_id == 2 else 200,
        connected_at_ms=1,
    )


def test_status_rows_table_and_problems():
    master = _status("SYNC_MASTER", 0, "m:1", slaves=[_snapshot(1, "s1:1"), _snapshot(2, "s2:1", fit=False)])
    rows = report.status_rows(
        master,
        {"s1:1": _status("SLAVE", 1, "s1:1", max_offset=990, replication_error="reset"), "s2:1": "cannot reach it"},
    )
    assert [(r["id"], r["role"], r["reachable"]) for r in rows] == [
        (0, "SYNC_MASTER", True),
        (1, "SLAVE", True),
        (2, "unreachable", False),
    ]
    assert rows[1]["max_offset"] == 990 and rows[2]["max_offset"] is None and rows[2]["error"] == "cannot reach it"
    assert [r["silent_seconds"] for r in rows] == [None, 0.2, 12.345]
    assert report.status_problems(rows, master)
    text = report.format_status(rows, master)
    header = text.splitlines()[1]
    for column in report.STATUS_COLUMNS:
        assert column in header
    assert "990/10" in text and "unreachable: cannot reach it" in text and "NO" in text
    assert "12.3" in text.splitlines()[4]
    assert "slave 1 at s1:1: last replication error: reset" in text
    healthy = _status("ASYNC_MASTER", 0, "m:1", slaves=[_snapshot(1, "s1:1")])
    rows = report.status_rows(healthy, {"s1:1": _status("SLAVE", 1, "s1:1")})
    assert not report.status_problems(rows, healthy)
    lonely = _status("SYNC_MASTER", 0, "m:1")
    assert "no slave connected" in report.format_status(report.status_rows(lonely, {}), lonely)


def test_status_of_a_slave():
    slave = _status("SLAVE", 1, "s:1", master_ha_address="m:2", master_connected=True, master_max_offset=1500)
    rows = report.status_rows(slave, {})
    assert len(rows) == 1 and not report.status_problems(rows, slave)
    assert "replicating from m:2: connected, master max offset 1500 (500 bytes behind)" in report.format_status(
        rows, slave
    )
    cut_off = slave | {"master_connected": False, "replication_error": "the master refused: log too long"}
    assert report.status_problems(rows, cut_off)
    assert "master m:2 UNREACHABLE (never heard from): the master refused: log too long" in report.format_status(
        report.status_rows(cut_off, {}), cut_off
    )


def test_status_of_a_slave_whose_master_stopped_says_so_once():
    """The master stopped: no 'master max offset 0 (0 bytes behind)', the error once (not three
    times), when it was last heard from and what the slave still serves."""
    refused = "Hello: UNAVAILABLE: failed to connect to all addresses; Connection refused"
    slave = _status(
        "SLAVE",
        1,
        "s:1",
        master_ha_address="m:2",
        master_connected=False,
        master_max_offset=0,
        replication_error=refused,
        master_last_contact_ms=1_700_000_000_000,
        acting_master=True,
        metadata_synced_ms=1_700_000_000_000,
        metadata_error=f"GetMetadata: {refused}",
    )
    text = report.format_status(report.status_rows(slave, {}), slave)
    assert text.count("Connection refused") == 1
    assert "master max offset" not in text and "bytes behind" not in text
    assert "master m:2 UNREACHABLE (last heard from at 2023-11-14 22:13:20 UTC)" in text
    assert "serves reads for it (enableSlaveActingMaster); no writes until a master is back" in text
    assert (
        "copied from the master: last at 2023-11-14 22:13:20 UTC (last attempt failed: the master is unreachable)"
        in text
    )


def test_table_alignment_and_cells():
    text = report.format_table(("name", "n", "ok"), [("a", 5, True), ("long-name", 12345, None)])
    lines = text.splitlines()
    assert lines[1].endswith("    5  yes") and lines[2].endswith("12345  -")


def test_perm_text_and_preview():
    assert (report.perm_text(6), report.perm_text(4), report.perm_text(7), report.perm_text(0)) == (
        "RW-",
        "R--",
        "RWX",
        "---",
    )
    assert report.body_preview(b"hello\nworld") == "hello\\nworld"
    assert report.body_preview(b"x" * 100).endswith("...") and len(report.body_preview(b"x" * 100)) == 43
    assert "\\xff" in report.body_preview(b"\xff\xfe")


def test_utc_text_of_times_that_are_no_dates():
    """A born time stored before the store refused times past the year 9999 (issue 30) is shown
    as its number, not a traceback, by `rocketstore message`."""
    assert report.utc_text(1_700_000_000_123) == "2023-11-14T22:13:20.123+00:00"
    assert (report.utc_text(0), report.utc_text(-5)) == ("-", "-")
    assert report.utc_text(10**16) == "10000000000000000 ms"
    assert report.utc_text(2**63 - 1) == f"{2**63 - 1} ms"


def test_status_in_controller_mode_shows_the_group():
    master = _status(
        "SYNC_MASTER",
        0,
        "m:1",
        controller_mode=True,
        master_broker_id=0,
        in_sync_replica_ids=[2, 0],
        group_max_offset=1000,
        lease_valid_ms=1200,
        epoch=7,
    )
    text = report.format_status(report.status_rows(master, {}), master)
    assert "epoch 7" in text
    # etcd's record of the log end lags a busy master by up to a second: not beside the live offsets.
    assert "controller mode: master broker 0, in-sync [0, 2], lease left 1200 ms" in text
    assert "1000" not in text.splitlines()[-1]
    unclean = _status(
        "SLAVE",
        1,
        "s:1",
        controller_mode=True,
        master_broker_id=-1,
        unclean_lost_bytes=4096,
        controller_error="control: no etcd endpoint answered",
    )
    text = report.format_status(report.status_rows(unclean, {}), unclean)
    assert "master none elected" in text and "up to 4096 bytes may be lost" in text
    assert "log end as last recorded in etcd: 0" in text
    assert "etcd: control: no etcd endpoint answered" in text


def test_status_names_damaged_records_and_held_replication():
    damage = {
        "records": [
            {
                "offset": 4096,
                "reason": "body CRC mismatch",
                "topic": "Orders",
                "queue_id": 2,
                "queue_offset": 7,
                "first_seen_ms": 1,
                "refusals": 3,
            }
        ],
        "record_count": 1,
        "refused_reads": 2,
        "refused_shipments": 1,
        "held_replication": {"1": 4096},
    }
    master = _status("SYNC_MASTER", 0, "m:1", stats={"damage": damage})
    rows = report.status_rows(master, {})
    assert report.status_problems(rows, master)
    text = report.format_status(rows, master)
    assert "DAMAGED RECORDS: 1 (body CRC mismatch: not served, not replicated" in text
    assert "CommitLog offset 4096 (Orders:2 queue offset 7, body CRC mismatch), refused 3 time(s)" in text
    assert "replication to slave 1 held at offset 4096: the record there is damaged" in text
    clean = _status("ASYNC_MASTER", 0, "m:1", stats={"damage": {"record_count": 0}})
    assert not report.damage_lines(clean) and not report.status_problems(report.status_rows(clean, {}), clean)
