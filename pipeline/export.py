"""Export topics to Parquet, partitioned by topic and date.

`export_topics(spark, store_dirs, out_dir, topics=None, ...)` reads the stores with the
`rocketstore-commitlog` source, keeps good records (error rows are counted, not exported), adds
`date` (the store timestamp's UTC date, yyyy-MM-dd) and writes Parquet under
`out_dir/topic=T/date=D/`. `mode` is Spark's save mode (`errorifexists` by default, `append`,
`overwrite`). Delta Lake is not written: delta-spark needs jars from a Maven repository, which
these machines cannot reach; the Parquet files can be converted in place (`CONVERT TO DELTA`)
where Delta is available. Driver-thread only.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ExportReport:
    out_dir: str
    rows: int
    error_rows: int
    partitions: tuple[tuple[str, str, int], ...]  # (topic, date, rows)


def export_topics(
    spark,
    store_dirs: list[str],
    out_dir: str,
    *,
    topics: list[str] | None = None,
    start_offset: int | None = None,
    end_offset: int | None = None,
    mode: str = "errorifexists",
) -> ExportReport:
    from pyspark.sql import functions as F

    from .spark import register

    register(spark)
    reader = spark.read.format("rocketstore-commitlog").option("paths", ",".join(map(str, store_dirs)))
    if topics:
        reader = reader.option("topics", ",".join(topics))
    if start_offset is not None:
        reader = reader.option("startOffset", str(start_offset))
    if end_offset is not None:
        reader = reader.option("endOffset", str(end_offset))
    df = reader.load().cache()
    try:
        errors = df.where("error is not null").count()
        good = df.where("error is null").withColumn(
            "date",
            F.date_format(
                F.to_utc_timestamp(F.timestamp_millis("store_timestamp"), F.current_timezone()), "yyyy-MM-dd"
            ),
        )
        good.write.mode(mode).partitionBy("topic", "date").parquet(str(out_dir))
        parts = good.groupBy("topic", "date").count().orderBy("topic", "date").collect()
    finally:
        df.unpersist()
    partitions = tuple((r["topic"], r["date"], r["count"]) for r in parts)
    return ExportReport(str(out_dir), sum(p[2] for p in partitions), errors, partitions)
