"""Shared pytest set-up: hypothesis profiles for a shared, noisy 2-core machine, and a local etcd
for the tests that run broker groups on one (integration and Spark).

Timing deadlines are off (speed is measured in bench/, never asserted); CI runs derandomized so a
failure reproduces from the same seed, locally examples vary from run to run.
"""

import os

import pytest
from hypothesis import HealthCheck, settings

from harness.local_etcd import EtcdServer

settings.register_profile(
    "ci",
    deadline=None,
    derandomize=True,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", deadline=None, print_blob=True, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci" if os.environ.get("CI") else "dev")


@pytest.fixture
def etcd(tmp_path):
    """A single-member etcd on 127.0.0.1 (Debian's etcd-server), stopped after the test."""
    server = EtcdServer(tmp_path / "etcd").start()
    yield server
    server.stop()
