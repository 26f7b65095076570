"""A broker.conf splits into the broker's, the store's and replication's configs."""

from __future__ import annotations

import pytest

from rocketstore.broker.config import configs_from_properties, load_broker_config, load_secrets
from store import BrokerRole, ConfigError

SECRET = "0123456789abcdef0123"


def test_one_file_feeds_three_configs(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "brokerClusterName=C1\nbrokerName=broker-b\nbrokerId=0\nbrokerRole=SYNC_MASTER\n"
        "flushDiskType=SYNC_FLUSH\nlistenPort=20911\nhaListenPort=20912\nslaveTimeout=1500\n"
        "haTransferBatchSize=65536\ninSyncReplicas=2\nhaSecret=" + SECRET + "\n"
    )
    broker, store, ha = load_broker_config(conf, {"listenPort": "0"})
    assert (broker.broker_cluster_name, broker.broker_name, broker.listen_port) == ("C1", "broker-b", 0)
    assert store.broker_role is BrokerRole.SYNC_MASTER and store.listen_port == 0
    assert store.slave_timeout_ms == 1500
    assert (ha.ha_listen_port, ha.ha_transfer_batch_size, ha.in_sync_replicas) == (20912, 65536, 2)
    assert SECRET not in repr(ha) + repr(broker)


def test_rocketmq_defaults():
    broker, store, ha = configs_from_properties({})
    assert (broker.listen_port, ha.ha_listen_port) == (10911, 10912)
    assert (ha.ha_send_heartbeat_interval_ms, ha.ha_housekeeping_interval_ms) == (5000, 20000)
    assert (ha.ha_transfer_batch_size, ha.ha_slave_fallbehind_max) == (32 * 1024, 256 * 1024 * 1024)
    assert ha.in_sync_replicas == 1 and store.slave_timeout_ms == 3000
    assert broker.host == "127.0.0.1"  # nothing listens beyond brokerIP1 unless bindAddress says so


def test_replication_streams_run_on_event_loops_unless_told():
    def on_loop(props: dict[str, str]) -> bool:
        return configs_from_properties(props)[2].streams_on_event_loop()

    assert on_loop({}) and on_loop({"haStreamOnEventLoop": "auto"}) and on_loop({"haStreamOnEventLoop": "true"})
    assert not on_loop({"haStreamOnEventLoop": "false"})
    with pytest.raises(ConfigError, match="haStreamOnEventLoop must be auto, true or false"):
        configs_from_properties({"haStreamOnEventLoop": "yes"})


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"bogusKey": "1"}, "unknown key: bogusKey"),
        ({"brokerRole": "SLAVE", "brokerId": "1"}, "haMasterAddress"),
        ({"brokerRole": "SLAVE", "haMasterAddress": "h:1"}, "brokerId > 0"),
        ({"brokerId": "2"}, "brokerId 0"),
        ({"inSyncReplicas": "0"}, "inSyncReplicas"),
        ({"haListenPort": "70000"}, "haListenPort"),
        ({"haTlsCertFile": "c.pem"}, "go together"),
        ({"haSecret": "a", "haSecretFile": "f"}, "not both"),
        ({"tlsEnable": "true"}, "tlsServerCertPath"),
        ({"haTransferBatchSize": "0"}, "must be positive"),
        ({"remotingMaxClients": "0"}, "remotingMaxClients must be positive"),
        ({"serverChannelMaxIdleTimeSeconds": "-1"}, "serverChannelMaxIdleTimeSeconds must be positive"),
        ({"channelExpiredTimeout": "0"}, "channelExpiredTimeout must be positive"),
        (
            {"consumerOffsetMaxEntries": "0"},
            r"consumerOffsetMaxEntries \(consumer_offset_max_entries\) must be positive",
        ),
        (
            {"remotingListenPort": "0", "maxMessageSize": str(4 << 20), "remotingMaxBufferedBytes": str(8 << 20)},
            r"below the largest remoting frame \(9437184 bytes",
        ),
        ({"haReconnectBackoffMin": "900", "haReconnectBackoffMax": "100"}, "must not exceed"),
        ({"reviveInterval": "0"}, r"reviveInterval out of range"),
        ({"defaultInvisibleTimeMills": "500"}, r"defaultInvisibleTimeMills out of range"),
        ({"renewAheadTimeMillis": "60000"}, r"renewAheadTimeMillis must be positive and below"),
        ({"renewMaxTimeMillis": "0"}, r"renewMaxTimeMillis must be positive"),
        (
            {
                "enableControllerMode": "true",
                "etcdEndpoints": "127.0.0.1:2379",
                "haSendHeartbeatInterval": "600",
                "haMaxTimeSlaveNotCatchup": "1000",
            },
            r"haSendHeartbeatInterval \(600 ms\) must be at most half of haMaxTimeSlaveNotCatchup",
        ),
    ],
)
def test_bad_configs_are_named(props, message):
    with pytest.raises(ConfigError, match=message):
        configs_from_properties(props)


def test_the_remoting_limits_come_from_broker_conf_with_rocketmqs_names():
    broker, store, _ = configs_from_properties(
        {
            "channelExpiredTimeout": "5000",
            "serverChannelMaxIdleTimeSeconds": "30",
            "remotingFrameTimeout": "2000",
            "remotingMaxConnections": "10",
            "remotingMaxBufferedBytes": str(64 << 20),
            "remotingMaxClientsPerGroup": "3",
            "remotingMaxConsumerGroups": "4",
            "remotingMaxClients": "5",
            "consumerOffsetMaxEntries": "6",
            "remotingMaxInFlightRequests": "7",
        }
    )
    limits = broker.remoting_limits
    assert (limits.max_connections, limits.max_buffered_bytes) == (10, 64 << 20)
    assert (limits.idle_timeout_ms, limits.frame_timeout_ms, limits.max_in_flight_requests) == (30_000, 2000, 7)
    clients = broker.client_limits
    assert (clients.expiry_ms, clients.max_clients_per_group, clients.max_groups, clients.max_clients) == (
        5000,
        3,
        4,
        5,
    )
    assert store.consumer_offset_max_entries == 6
    defaults = configs_from_properties({}).broker
    assert defaults.channel_expired_timeout_ms == 120_000 and defaults.server_channel_max_idle_s == 120


def test_endpoints_need_authentication():
    with pytest.raises(ConfigError, match="haSecret"):
        load_secrets(configs_from_properties({}))
    with pytest.raises(ConfigError, match="at least 16 bytes"):
        load_secrets(configs_from_properties({"haSecret": "short"}))
    secrets = load_secrets(configs_from_properties({"haSecret": SECRET}))
    assert secrets.admin == secrets.ha == SECRET.encode()
    assert SECRET not in repr(secrets)
    other = load_secrets(configs_from_properties({"haSecret": SECRET, "adminSecret": "admin-secret-0123456789"}))
    assert other.admin == b"admin-secret-0123456789"
