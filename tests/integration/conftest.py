"""Fixtures for tests that run broker processes: clusters on 127.0.0.1 in the test's tmp dir,
stopped afterwards, with every broker's stderr printed when the test failed (the etcd fixture is
in the top conftest, shared with the Spark tests)."""

from __future__ import annotations

import pytest

from harness.local_cluster import LocalCluster
from support import BROKER_TEST_SETTINGS

TEST_SETTINGS = BROKER_TEST_SETTINGS


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


@pytest.fixture
def make_cluster(tmp_path, request):
    """`make_cluster(master_role=..., flush_disk_type=..., slaves=1, settings={...})` -> a started
    LocalCluster; stopped at the end of the test, logs printed if the test failed."""
    clusters: list[LocalCluster] = []

    def make(start: bool = True, **kwargs) -> LocalCluster:
        settings = dict(TEST_SETTINGS)
        settings.update(kwargs.pop("settings", {}))
        cluster = LocalCluster(tmp_path / f"cluster{len(clusters)}", settings=settings, **kwargs)
        clusters.append(cluster)
        return cluster.start() if start else cluster

    yield make
    failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
    errors = []
    for cluster in clusters:
        if failed:
            print(cluster.tails())
        try:
            cluster.stop()
        except RuntimeError as exc:
            errors.append(str(exc))
    assert not errors, "\n".join(errors)


@pytest.fixture
def admin_cluster(make_cluster, monkeypatch):
    """A started SYNC_MASTER and its slave, with ROCKETSTORE_ADMIN_SECRET set for the admin commands."""
    started = make_cluster()
    monkeypatch.setenv("ROCKETSTORE_ADMIN_SECRET", started.admin_secret().decode())
    return started
