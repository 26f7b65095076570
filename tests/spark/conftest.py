"""One SparkSession (local[2], bound to 127.0.0.1) for every Spark test. pyspark is imported at
collection: without it these tests fail, they never skip."""

from __future__ import annotations

import pyspark
import pytest

from pipeline.spark import session

SPARK_VERSION = pyspark.__version__  # imported here: a missing Spark fails collection


@pytest.fixture(scope="session")
def spark():
    s = session("local[2]", app_name="rocketstore-tests", shuffle_partitions=2)
    yield s
    s.stop()
