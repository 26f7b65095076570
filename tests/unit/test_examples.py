"""The sample configurations in examples/ and deploy/ load as they are (a sample that rots is worse
than none), and the broker image exposes and health-checks what its broker.conf says."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocketstore.broker.config import load_broker_config
from store import BrokerRole

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.conf")), ids=lambda p: p.name)
def test_every_example_config_loads(path):
    broker, store, ha = load_broker_config(path)
    assert broker.broker_name and store.store_path_root_dir and ha.ha_secret_file


def test_the_examples_make_a_master_with_its_slave_and_a_controller_group():
    master, slave = (load_broker_config(EXAMPLES / name) for name in ("master.conf", "slave.conf"))
    assert master.store.broker_role is BrokerRole.SYNC_MASTER and slave.store.broker_role is BrokerRole.SLAVE
    assert slave.ha.ha_master_address.endswith(f":{master.ha.ha_listen_port}")
    group = [load_broker_config(EXAMPLES / f"controller-broker{i}.conf") for i in range(3)]
    assert [c.broker.broker_id for c in group] == [0, 1, 2]
    assert all(c.ha.enable_controller_mode for c in group)
    assert len({c.broker.listen_port for c in group}) == 3 and len({c.ha.ha_listen_port for c in group}) == 3


DEPLOY = EXAMPLES.parent / "deploy"


def test_the_image_exposes_the_compose_brokers_ports_and_checks_each_broker_on_its_own():
    first = load_broker_config(DEPLOY / "broker0.conf")
    ports = {
        first.broker.listen_port,
        first.ha.ha_listen_port,
        first.broker.remoting_listen_port,
        first.broker.metrics_port,
    }
    dockerfile = (EXAMPLES.parent / "Dockerfile").read_text()
    exposed = {int(p) for line in dockerfile.splitlines() if line.startswith("EXPOSE ") for p in line.split()[1:]}
    assert exposed == ports
    # The health check reads the arguments the container's broker was started with, so a broker on
    # another port (the two-groups profile's 10941, 10951) is asked on its own port, not on 10911.
    assert '"health", "--broker-args", "/run/rocketstore/broker.args"' in dockerfile
    assert "printf '%s\\0' \"$@\" >/run/rocketstore/broker.args" in (DEPLOY / "entrypoint.sh").read_text()
    compose = (EXAMPLES.parent / "docker-compose.yml").read_text()
    assert "healthcheck:" not in compose
    for conf in sorted(DEPLOY.glob("broker*.conf")):
        port = load_broker_config(conf).broker.listen_port
        assert f"127.0.0.1:{port}:{port}" in compose, conf.name
