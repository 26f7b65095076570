"""Spark sessions for the pipeline: local mode bound to 127.0.0.1, or a given master.

`session(master, conf=...)` builds (or returns the running) SparkSession with the settings these
machines need and registers the pipeline's sources. The driver binds 127.0.0.1 (SPARK_LOCAL_IP,
driver host and bind address) in local mode and when the master's own address is a loopback one
(a standalone cluster on this machine), so nothing listens beyond it; for a cluster elsewhere
Spark's own choice applies, or what `conf` (spark.driver.host, ...) says. Python workers run
this interpreter (`spark.pyspark.python`), so on other machines the same path must hold the same
environment. `conf` adds any Spark setting (`spark.executor.memory`, ...), as spark-submit's
--conf does. Call from the driver's main thread.
"""

from __future__ import annotations

import ipaddress
import os
import sys
from collections.abc import Mapping
from urllib.parse import urlsplit

DEFAULT_MASTER = "local[*]"


def session(
    master: str = DEFAULT_MASTER,
    *,
    app_name: str = "rocketstore-pipeline",
    shuffle_partitions: int | None = None,
    progress_bar: bool = False,
    log_level: str = "ERROR",
    conf: Mapping[str, str] | None = None,
):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    local = master.startswith("local") or on_loopback(master)
    if local:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "true" if progress_bar else "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.pyspark.python", os.environ["PYSPARK_PYTHON"])
    )
    if local:
        builder = builder.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
    if shuffle_partitions is not None:
        builder = builder.config("spark.sql.shuffle.partitions", str(shuffle_partitions))
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    register(spark)
    return spark


def on_loopback(master: str) -> bool:
    """Whether a master URL (spark://host:port, several hosts comma-separated) names this machine's
    loopback addresses only."""
    if "://" not in master:
        return False
    hosts = [urlsplit(f"spark://{part}").hostname or "" for part in master.split("://", 1)[1].split(",")]
    return all(host == "localhost" or _is_loopback(host) for host in hosts)


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def register(spark) -> None:
    """Make `spark.read.format("rocketstore-commitlog")` and `spark.readStream.format("rocketstore")`
    available in this session."""
    from .commitlog_source import CommitLogSource
    from .stream_source import RocketStoreStreamSource

    spark.dataSource.register(CommitLogSource)
    spark.dataSource.register(RocketStoreStreamSource)
