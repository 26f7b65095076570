"""Turns gRPC's fork support off for this process, before gRPC is imported: imported for that
effect alone, first, by each package a process starts from (`rocketstore`, `client`, `pipeline`).

With it on (grpcio's default), gRPC runs its own handlers around every `fork()`, and while a
channel or server is active the child's handler can crash before the child reaches `exec`
(grpc/grpc#43055, measured here: 11 of 300 `subprocess.Popen(..., preexec_fn=...)` children
failed). PySpark starts its JVM that way, so a driver that had talked to a broker could fail to
start Spark. Nothing here uses gRPC in a forked child without `exec`, which is all that fork
support is for. gRPC reads the setting once, when it is imported; a value the environment
already sets is kept.

Thread-safety: runs once, at import.
"""

import os

os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
