"""The demos behind `rocketstore demo` (a master and a slave on 127.0.0.1, produced with sync
replication, consumed from both: `broker_demo`) and `rocketstore crash-demo` (the store alone: a
SYNC_FLUSH writer killed and recovered, and the writer mode the crash tests use: `store_demo`),
and the runner the broker demo starts its brokers with (`local_brokers`: broker processes on
127.0.0.1, a master and its slaves), which the test rigs in `harness/` build on."""
