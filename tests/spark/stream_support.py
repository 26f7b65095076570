"""What the streaming source's Spark tests share: one Trigger.availableNow run of the
`rocketstore` source into Parquet."""

from __future__ import annotations

QUERY_TIMEOUT_S = 120


def stream(spark, endpoint: str, topics: str, out, checkpoint, **options):
    """One Trigger.availableNow run into Parquet; its progress entries."""
    reader = spark.readStream.format("rocketstore").option("endpoint", endpoint).option("topics", topics)
    for name, value in options.items():
        reader = reader.option(name, str(value))
    query = (
        reader.load()
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(QUERY_TIMEOUT_S), "the query did not finish"
    finally:
        query.stop()
    assert query.exception() is None, query.exception()
    return query.recentProgress
