"""Test rigs for tests and benchmarks, kept in the repository and not installed: `local_cluster`
(broker groups on 127.0.0.1, built on the product's runner `demos.local_brokers`, controller mode
included), `containers` (broker groups in containers), `local_etcd` (an etcd process on
127.0.0.1), `ports` (ports for servers started later), `verify` (checks, on the stores once the
brokers are stopped, that every acknowledged message is there) and `compose_status` (waits for
the compose cluster's master). Nothing in the application imports it; it never imports the broker
or the command line."""
