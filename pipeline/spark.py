"""Spark sessions for the pipeline: local mode bound to 127.0.0.1, or a given master.

`session(master)` builds (or returns the running) SparkSession with the settings these machines
need (NOTES-pyspark: SPARK_LOCAL_IP, driver host and bind address on loopback for local mode; the
workers run this interpreter, so the `pipeline` and `store` packages import there), and registers
the `rocketstore-commitlog` source. Call from the driver's main thread.
"""

from __future__ import annotations

import os
import sys

DEFAULT_MASTER = "local[*]"


def session(
    master: str = DEFAULT_MASTER,
    *,
    app_name: str = "rocketstore-pipeline",
    shuffle_partitions: int | None = None,
    progress_bar: bool = False,
    log_level: str = "ERROR",
):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    local = master.startswith("local")
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
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    register(spark)
    return spark


def register(spark) -> None:
    """Make `spark.read.format("rocketstore-commitlog")` and `spark.readStream.format("rocketstore")`
    available in this session."""
    from .commitlog_source import CommitLogSource
    from .stream_source import RocketStoreStreamSource

    spark.dataSource.register(CommitLogSource)
    spark.dataSource.register(RocketStoreStreamSource)
