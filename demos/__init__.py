"""The demos behind `rocketstore demo` (a master and a slave on 127.0.0.1, produced with sync
replication, consumed from both: `broker_demo`) and `rocketstore crash-demo` (the store alone: a SYNC_FLUSH writer
killed and recovered, and the writer mode the crash tests use: `store_demo`)."""
