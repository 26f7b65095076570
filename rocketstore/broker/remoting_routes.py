"""The broker core's route (`core.routes.Route`) as RocketMQ's TopicRouteData, the body of the
remoting API's GET_ROUTEINFO_BY_TOPIC: what a 4.x client's name server answers.

    {"orderTopicConf": null,
     "queueDatas":  [{"brokerName", "readQueueNums", "writeQueueNums", "perm", "topicSysFlag"}, ...],
     "brokerDatas": [{"cluster", "brokerName", "brokerAddrs": {"<brokerId>": "host:port", ...}}, ...],
     "filterServerTable": {}}

One queueData and one brokerData per group: the queues and permission of the broker serving at id
0 (the master, or a slave standing in for it, read-only), else of the group's first broker,
read-only (a group electing a master: its slaves still serve reads); the addresses are the
brokers' remoting endpoints by id. A broker whose remoting endpoint is not known (one without
`remotingListenPort`, or a group member this broker knows only first-hand) is left out, and a
group with none at all too: a 4.x client could not reach it.

Pure functions; thread-safe.
"""

from __future__ import annotations

from store.metadata.topic_config import Permission

from .core.routes import Route, RouteBroker


def topic_route_data(route: Route, cluster: str, own_client: str, own_remoting: str) -> dict[str, object]:
    """`route` as TopicRouteData; this broker (`own_client`) is named by `own_remoting`."""

    def remoting(broker: RouteBroker) -> str:
        return own_remoting if broker.client_endpoint == own_client else broker.remoting_endpoint

    queue_datas: list[dict[str, object]] = []
    broker_datas: list[dict[str, object]] = []
    for group in route.groups():
        addresses = {str(b.broker_id): remoting(b) for b in group.members if remoting(b)}
        if not addresses:
            continue
        shown = group.serving or group.members[0]
        config = shown.config
        perm = int(config.perm & ~Permission.WRITE if shown.read_only or group.serving is None else config.perm)
        queue_datas.append(
            {
                "brokerName": group.broker_name,
                "readQueueNums": config.read_queue_nums,
                "writeQueueNums": config.write_queue_nums,
                "perm": perm,
                "topicSysFlag": 0,
            }
        )
        broker_datas.append({"cluster": cluster, "brokerName": group.broker_name, "brokerAddrs": addresses})
    return {"orderTopicConf": None, "queueDatas": queue_datas, "brokerDatas": broker_datas, "filterServerTable": {}}
