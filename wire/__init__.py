"""The wire layer: what the brokers, the replication adapters, the clients and the pipeline share,
below all of them. It imports nothing of the project's.

- `rpc/`: the generated gRPC code of `proto/wire/rpc/*.proto` (`make proto`; never edited)
- `auth.py`: shared-secret call signatures and mutual TLS credentials
- `digests.py`: message body digests of the client API
- `grpc_fork.py`: turns gRPC's fork support off before gRPC is imported (entry packages import it)
- `grpc_pollers.py`: runs gRPC without its EventEngine in a broker's process (the broker command imports it first)
"""
