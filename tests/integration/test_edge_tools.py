"""The measuring tools of issue 30 run briefly and print their summaries: `bench.edge_fuzz`
against both groups and protocols, and `bench.edge_attacks` with two of its scenarios. What they
measure is the broker's business (today's main fails most attacks); here they must run, stop their
brokers, and report every section."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_tool(*argv: str, timeout_s: float) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", *argv], cwd=REPO, capture_output=True, text=True, timeout=timeout_s)
    assert done.returncode == 0, f"exit status {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    return done


def test_the_fuzzer_sends_every_kind_of_request_and_reports_on_every_broker():
    done = run_tool("bench.edge_fuzz", "--seconds", "3", "--protocol", "both", "--seed", "7", "--json", timeout_s=240)
    report = json.loads(done.stdout)
    assert report["config"]["seed"] == 7 and report["requests"] > 0
    services = {name.rsplit("/", 1)[0] for name in report["per_method"]}
    assert {"grpc MessagingService", "grpc Admin", "grpc Replication"} <= services
    assert any(name.startswith("remoting ") for name in report["per_method"])
    assert set(report["modes"]) <= {"valid", "mutated", "raw", "random"} and report["modes"]
    assert set(report["brokers"]) == {"open master", "open slave1", "acl master", "acl slave1"}
    for broker in report["brokers"].values():
        assert broker["rss_bytes"]["peak"] >= broker["rss_bytes"]["start"] > 0
        assert broker["threads"]["start"] > 0 and broker["disk_bytes"]["end"] > 0
    checks = {(c["broker"], c["what"]) for c in report["health"]}
    assert ("open slave1", "remoting pull") in checks and ("acl slave1", "grpc pull") in checks
    assert report["load_before"] and report["load_after"]
    assert not Path(report["environment"]["dir"]).exists(), "the run directory is left behind"


def test_the_fuzzer_text_report_has_every_section():
    done = run_tool("bench.edge_fuzz", "--seconds", "2", "--protocol", "remoting", "--seed", "3", timeout_s=240)
    out = done.stdout
    for section in (
        "edge fuzz: 2 s, protocol remoting, seed 3",
        "requests:",
        "remoting SEND_MESSAGE",
        "transport errors (no answer):",
        "liveness probes:",
        "brokers:",
        "tracebacks in the broker logs:",
        "after the run, a good send and pull:",
        "load after:",
    ):
        assert section in out, f"{section!r} missing from:\n{out}"


def test_the_attacks_print_a_verdict_and_figures_per_scenario():
    done = run_tool("bench.edge_attacks", "--only", "admin-replay,receipt-non-ascii", "--json", timeout_s=240)
    report = json.loads(done.stdout)
    assert [r["name"] for r in report["results"]] == ["admin-replay", "receipt-non-ascii"]
    for result in report["results"]:
        assert result["verdict"] in ("PASS", "FAIL") and result["figures"], result
    assert "the same header on the master with another body (=61)" in report["results"][0]["figures"]
    assert sum(report["summary"].values()) == 2 and report["summary"]["ERROR"] == 0
    listed = run_tool("bench.edge_attacks", "--list", timeout_s=60).stdout.split()
    assert "wedge-frame" in listed and "pull-after-send" in listed and len(listed) == 18
