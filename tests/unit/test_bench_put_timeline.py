"""`bench.put_timeline`: a put's cycle of markers cut out of `perf script` text, the hop table, and
the refusal without perf."""

from __future__ import annotations

import shutil
from pathlib import Path

from bench import put_timeline
from bench.put_timeline import _perf_failure, format_table, hop, parse_cycles, perf_record_command

CLIENT, MASTER, SLAVE = 4212, 4300, 4400
BASE = 11_750_000_000  # 11750 s on perf's clock, in microseconds

# Two puts, and one between them cut short (its slave never answered before the next send): the
# client 4212; the master's loop 4301, its poller 4302, its flush thread 4305; the slave's loop 4400,
# which flushes itself, and its poller 4402. The first line's exit has no entry (recording began
# during the call); the slave's poller meets EAGAIN once before the chunk is in.
TRACE = """\
          python  4400/4400  11750.000050:  syscalls:sys_exit_epoll_pwait: 0x1
          python  4212/4212  11750.000100:    syscalls:sys_enter_sendto: fd: 0x00000007, buff: 0x7f01, len: 0x000004a0
          python  4212/4212  11750.000110:     syscalls:sys_exit_sendto: 0x4a0
          python  4300/4301  11750.000130:      syscalls:sys_enter_read: fd: 0x0000000c, buf: 0x7f02, count: 0x00010000
          python  4300/4301  11750.000140:       syscalls:sys_exit_read: 0x4a0
          python  4300/4301  11750.000300:   syscalls:sys_enter_sendmsg: fd: 0x00000011, msg: 0x7f03, flags: 0x00004000
          python  4300/4301  11750.000310:    syscalls:sys_exit_sendmsg: 0x4c0
          python  4300/4305  11750.000320: syscalls:sys_enter_fdatasync: fd: 0x00000009
          python  4400/4402  11750.000325:   syscalls:sys_enter_recvmsg: fd: 0x00000010, msg: 0x7f04, flags: 0x00000000
          python  4400/4402  11750.000330:    syscalls:sys_exit_recvmsg: 0x4c0
          python  4400/4400  11750.000400: syscalls:sys_enter_fdatasync: fd: 0x0000000b
          python  4300/4305  11750.000520:  syscalls:sys_exit_fdatasync: 0x0
          python  4400/4400  11750.000800:  syscalls:sys_exit_fdatasync: 0x0
          python  4400/4400  11750.000850:   syscalls:sys_enter_sendmsg: fd: 0x00000021, msg: 0x7f05, flags: 0x00004000
          python  4400/4400  11750.000860:    syscalls:sys_exit_sendmsg: 0x54
          python  4300/4302  11750.000880:   syscalls:sys_enter_recvmsg: fd: 0x00000012, msg: 0x7f06, flags: 0x00000000
          python  4300/4302  11750.000890:    syscalls:sys_exit_recvmsg: 0x54
          python  4300/4301  11750.000950:     syscalls:sys_enter_write: fd: 0x0000000c, buf: 0x7f07, count: 0x000000f5
          python  4300/4301  11750.000960:      syscalls:sys_exit_write: 0xf5
          python  4212/4212  11750.001000:  syscalls:sys_enter_recvfrom: fd: 0x00000007, ubuf: 0x7f08, size: 0x00010000
          python  4212/4212  11750.001010:   syscalls:sys_exit_recvfrom: 0xf5
          python  4212/4212  11750.002100:    syscalls:sys_enter_sendto: fd: 0x00000007, buff: 0x7f01, len: 0x000004a0
          python  4212/4212  11750.002110:     syscalls:sys_exit_sendto: 0x4a0
          python  4300/4301  11750.002130:      syscalls:sys_enter_read: fd: 0x0000000c, buf: 0x7f02, count: 0x00010000
          python  4300/4301  11750.002140:       syscalls:sys_exit_read: 0x4a0
          python  4212/4212  11750.003100:    syscalls:sys_enter_sendto: fd: 0x00000007, buff: 0x7f01, len: 0x000004a0
          python  4212/4212  11750.003110:     syscalls:sys_exit_sendto: 0x4a0
          python  4300/4301  11750.003150:      syscalls:sys_enter_read: fd: 0x0000000c, buf: 0x7f02, count: 0x00010000
          python  4300/4301  11750.003160:       syscalls:sys_exit_read: 0x4a0
          python  4300/4301  11750.003200: syscalls:sys_enter_epoll_pwait: epfd: 0x00000006, maxevents: 0x400
          python  4300/4301  11750.003210:  syscalls:sys_exit_epoll_pwait: 0x0
          python  4300/4301  11750.003300:   syscalls:sys_enter_sendmsg: fd: 0x00000011, msg: 0x7f03, flags: 0x00004000
          python  4300/4301  11750.003310:    syscalls:sys_exit_sendmsg: 0x4c0
          python  4300/4305  11750.003310: syscalls:sys_enter_fdatasync: fd: 0x00000009
          python  4400/4402  11750.003312:   syscalls:sys_enter_recvmsg: fd: 0x00000010, msg: 0x7f04, flags: 0x00000000
          python  4400/4402  11750.003313:    syscalls:sys_exit_recvmsg: 0xfffffffffffffff5
          python  4400/4402  11750.003325:   syscalls:sys_enter_recvmsg: fd: 0x00000010, msg: 0x7f04, flags: 0x00000000
          python  4400/4402  11750.003330:    syscalls:sys_exit_recvmsg: 0x4c0
          python  4400/4400  11750.003350:     syscalls:sys_enter_futex: uaddr: 0x55d6, op: 0x00000081, val: 0x00000001
          python  4400/4400  11750.003351:      syscalls:sys_exit_futex: 0x1
          python  4400/4400  11750.003400: syscalls:sys_enter_fdatasync: fd: 0x0000000b
          python  4300/4305  11750.003610:  syscalls:sys_exit_fdatasync: 0x0
          python  4400/4400  11750.003700:  syscalls:sys_exit_fdatasync: 0x0
          python  4400/4400  11750.003750:   syscalls:sys_enter_sendmsg: fd: 0x00000021, msg: 0x7f05, flags: 0x00004000
          python  4400/4400  11750.003760:    syscalls:sys_exit_sendmsg: 0x54
          python  4300/4302  11750.003780:   syscalls:sys_enter_recvmsg: fd: 0x00000012, msg: 0x7f06, flags: 0x00000000
          python  4300/4302  11750.003790:    syscalls:sys_exit_recvmsg: 0x54
          python  4300/4301  11750.003850:     syscalls:sys_enter_write: fd: 0x0000000c, buf: 0x7f07, count: 0x000000f5
          python  4300/4301  11750.003860:      syscalls:sys_exit_write: 0xf5
          python  4212/4212  11750.003900:  syscalls:sys_enter_recvfrom: fd: 0x00000007, ubuf: 0x7f08, size: 0x00010000
          python  4212/4212  11750.003910:   syscalls:sys_exit_recvfrom: 0xf5
"""


def _at(**offsets: int) -> dict[str, float]:
    return {marker: float(BASE + us) for marker, us in offsets.items()}


FIRST = _at(
    c_send=100,
    m_read=140,
    m_chunk=300,
    m_fsync=320,
    m_fsync_end=520,
    s_recv=330,
    s_fsync=400,
    s_fsync_end=800,
    s_report=850,
    m_recv_report=890,
    m_answer=950,
    c_recv=1010,
)
# The slave's futex before its flush is a GIL hand-off, not a flush request: it flushes on its loop.
THIRD = _at(
    c_send=3100,
    m_read=3160,
    m_chunk=3300,
    m_fsync=3310,
    m_fsync_end=3610,
    s_recv=3330,
    s_fsync=3400,
    s_fsync_end=3700,
    s_report=3750,
    m_recv_report=3790,
    m_answer=3850,
    c_recv=3910,
)


def test_the_complete_cycles_are_cut_out_and_the_one_cut_short_is_dropped():
    cycles = parse_cycles(TRACE.splitlines(), MASTER, SLAVE, CLIENT)
    assert cycles == [FIRST, THIRD]


def test_hops_are_the_p50_and_mean_over_the_cycles_that_have_both_markers():
    cycles = parse_cycles(TRACE.splitlines(), MASTER, SLAVE, CLIENT)
    assert hop(cycles, "c_send", "m_read") == (60.0, 50.0)  # 40 and 60 us; p50 the upper of two
    assert hop(cycles, "m_chunk", "s_recv") == (30.0, 30.0)
    assert hop(cycles, "s_fsync", "s_fsync_end") == (400.0, 350.0)
    assert hop(cycles, "s_report", "m_recv_report") == (40.0, 40.0)
    assert hop(cycles, "m_answer", "c_recv") == (60.0, 60.0)
    assert hop(cycles, "c_send", "c_recv") == (910.0, 860.0)
    assert hop(cycles, "m_chunk", "m_fsync") == (20.0, 15.0)
    assert hop(cycles, "m_fsync", "m_fsync_end") == (300.0, 250.0)
    assert hop(cycles, "s_recv", "s_loop_wake") is None


def test_the_table_sets_the_systems_side_by_side_with_the_finer_hops_found_in_most_cycles():
    broker = parse_cycles(TRACE.splitlines(), MASTER, SLAVE, CLIENT)
    # A floor twice as fast whose slave's poller wakes its loop in every put, and whose master's
    # loop wakes after the report in one put of two only (not most: no row).
    floor = [{marker: t / 2 for marker, t in cycle.items()} for cycle in broker]
    for cycle in floor:
        cycle.update(s_poller_wakes_loop=cycle["s_recv"] + 10, s_loop_wake=cycle["s_recv"] + 30)
    floor[0]["m_loop_wake"] = floor[0]["m_recv_report"] + 5
    rows = {" ".join(line.split()[:3]): line.split()[3:] for line in format_table({"broker": broker, "floor": floor})}

    assert rows["hop (microseconds) broker"] == ["p50", "mean", "floor", "p50", "mean", "broker/floor"]
    assert rows["c_send -> m_read"] == ["60", "50.0", "30", "25.0", "2.00x"]
    assert rows["s_recv -> s_fsync"] == ["70", "70.0", "35", "35.0", "2.00x"]
    assert rows["s_recv -> s_poller_wakes_loop"] == ["-", "-", "10", "10.0", "-"]
    assert rows["s_poller_wakes_loop -> s_loop_wake"] == ["-", "-", "20", "20.0", "-"]
    assert rows["s_loop_wake -> s_fsync"] == ["-", "-", "5", "5.0", "-"]
    assert rows["round trip (c_send"] == ["->", "c_recv)", "910", "860.0", "455", "430.0", "2.00x"]
    assert rows["master fdatasync: m_chunk"] == ["->", "its", "start", "20", "15.0", "10", "7.5", "2.00x"]
    assert not any("m_loop_wake" in key for key in rows)
    assert not any("flush_request" in key for key in rows)
    assert len(rows) == 1 + 9 + 3 + 1 + 2  # header, required hops, the floor's finer ones, round trip, fsync


def test_one_system_alone_has_no_ratio_column():
    lines = format_table({"floor": parse_cycles(TRACE.splitlines(), MASTER, SLAVE, CLIENT)})
    assert lines[0].split() == ["hop", "(microseconds)", "floor", "p50", "mean"]
    assert lines[1].split() == ["c_send", "->", "m_read", "60", "50.0"]


def test_no_complete_cycle_prints_dashes():
    lines = format_table({"broker": [], "floor": []})
    assert lines[1].split() == ["c_send", "->", "m_read", "-", "-", "-", "-", "-"]


def test_perf_records_the_syscalls_of_the_three_processes():
    command = perf_record_command([1, 2, 3], Path("/d/broker.perf"), 2.0)
    assert command[:2] == ["perf", "record"] and command[-4:] == ["/d/broker.perf", "--", "sleep", "2"]
    assert command[command.index("-p") + 1] == "1,2,3"
    events = command[command.index("-e") + 1].split(",")
    assert "syscalls:sys_enter_fdatasync" in events and "syscalls:sys_exit_recvmsg" in events
    assert len(events) == 20


def test_a_perf_failure_is_one_line():
    stderr = "Error:\nNo permissions to read /sys/kernel/tracing/events/syscalls\nHint: try 'sudo mount'\n"
    message = str(_perf_failure("perf record", 255, stderr))
    assert "\n" not in message
    assert message.startswith("perf record failed (exit 255): Error: No permissions to read")
    assert message.endswith("(syscall tracepoints need root or kernel.perf_event_paranoid=-1)")
    gone = str(_perf_failure("perf record", 244, "Couldn't create thread/CPU maps: No such process\n"))
    assert gone == "perf record failed (exit 244): Couldn't create thread/CPU maps: No such process"


def test_without_perf_it_refuses_with_one_line_and_status_2(monkeypatch, capsys):
    monkeypatch.setattr(shutil, "which", lambda name, *args, **kwargs: None)
    assert put_timeline.main(["--only", "floor"]) == 2
    captured = capsys.readouterr()
    assert captured.err == "perf not found: apt-get install linux-perf\n"
    assert captured.out == ""
