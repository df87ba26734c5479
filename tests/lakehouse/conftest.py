"""The lakehouse tier: tables on an S3-compatible store (s3proxy) behind Iceberg's REST catalog
server, both started here on free loopback ports and stopped after (``eqdelete.tools.lakehouse``).

Spark reaches them through the catalog ``lake``, registered on the test session with the
catalog properties a user writes in spark-defaults.conf, Flink through Flink SQL's CREATE CATALOG,
pyiceberg through ``load_catalog``. None of them holds an S3 key: the catalog hands each table's
keys to the table's own FileIO, so a read or write through anything else fails.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from eqdelete.tools.lakehouse import Lakehouse

CATALOG = "lake"


@pytest.fixture(scope="session")
def lakehouse(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lakehouse]:
    # Each request logged: the benchmark's test counts the GETs of delete files in it.
    with Lakehouse(tmp_path_factory.mktemp("lakehouse"), log_requests=True) as lake:
        yield lake


@pytest.fixture(scope="session")
def lake(spark: SparkSession, lakehouse: Lakehouse) -> str:
    """The REST catalog, registered on the running session (Spark makes it on first use)."""
    for key, value in lakehouse.spark_options(CATALOG).items():
        spark.conf.set(key, value)
    return CATALOG


def iceberg_release(spark: SparkSession) -> str:
    """The Iceberg release the session runs (for the AWS bundle of the same release, and other processes)."""
    return spark.sql("SELECT eqdelete_version()").first()[0].split("Iceberg ")[1].rstrip(")")
