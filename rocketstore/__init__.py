"""rocketstore"""

import wire.grpc_fork  # noqa: F401 - before anything imports gRPC
