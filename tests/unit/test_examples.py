"""The sample configurations in examples/ load as they are (a sample that rots is worse than none)."""

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
