"""Running brokers on this machine for tests, benchmarks and demos: `local_cluster` starts broker
processes on 127.0.0.1 in directories of their own (static groups and controller groups) and
stops them (asking their state through the client); `verify` checks, on the stores once the
brokers are stopped, that every acknowledged message is there. Nothing in the broker imports it."""
