"""Generated gRPC code for RocketStore's wire APIs; regenerate with `make proto` (never edit).

- `messaging_pb2*`: the client API, package `apache.rocketmq.v2` (RocketMQ 5's messaging API subset)
- `ha_pb2*`: replication between a master and its slaves, package `rocketstore.ha.v1`
- `admin_pb2*`: broker status and topic management, package `rocketstore.admin.v1`
"""
