"""RocketStore's data pipeline on Apache Spark (PySpark): read CommitLogs at scale.

- `rocketstore-commitlog`, a batch data source over store directories (`commitlog_source`), built
  on a deterministic record walk (`walk`), a partition plan (`layout`), the reading of one range
  (`scan`) and a vectorised decoder that agrees with the store's codec (`decode`);
- replica audits (`audit.audit_replicas`, per-range statistics in `audit_stats`), offline rebuilds
  of ConsumeQueues and IndexFiles (`rebuild.rebuild_store`), Parquet export by topic and date
  (`export.export_topics`); vectorised string hashes (`strings`);
- sessions (`spark.session`); the `rocketstore pipeline` subcommand that runs these jobs is in
  `rocketstore/commands/pipeline.py`.

Importing this package imports neither Spark nor Arrow; `register(spark)` does.
"""

from __future__ import annotations

import wire.grpc_fork  # noqa: F401 - before anything imports gRPC

FORMAT = "rocketstore-commitlog"


def register(spark) -> None:
    """Register the `rocketstore-commitlog` data source in `spark`."""
    from .spark import register as _register

    _register(spark)


__all__ = ["FORMAT", "register"]
