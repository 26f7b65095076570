"""Failover: how a broker group changes its master.

- `controller_agent`: controller mode's adapter between etcd and the broker (lease, elections,
  the in-sync set); the decisions are `ha.controller`'s.
- `controller_roles`: a broker's role changes in controller mode (promote, step down, follow).
- `switchover`: a planned switchover in static mode (`rocketstore admin elect`), and the role
  override that keeps it across restarts.
- `replication_side`: what both drive on the broker (`ReplicationSide`); the process wires in
  `rocketstore.broker.replication_role.ReplicationRole`.

See docs/failover.md. Threads are the ones each module's docstring names.
"""
