"""The writer refuses bad input with messages that name the problem, and commits nothing."""

from __future__ import annotations

import pytest
from fixtures import _create, _insert
from pyspark.sql import SparkSession

from eqdelete import write_equality_deletes


def _snapshots(spark: SparkSession, table: str) -> int:
    return spark.table(f"{table}.snapshots").count()


@pytest.fixture
def small_table(spark: SparkSession, table_name: str) -> str:
    _create(spark, table_name, "k BIGINT, region STRING, v STRING", "region")
    _insert(spark, table_name, [(1, "eu", "a")])
    return table_name


def test_unknown_equality_column(spark: SparkSession, small_table: str) -> None:
    with pytest.raises(Exception, match="equality column 'nope' is not a column"):
        write_equality_deletes(spark, small_table, ["nope"], spark.table(small_table))
    assert _snapshots(spark, small_table) == 1


def test_partitioned_deletes_need_the_partition_column(spark: SparkSession, small_table: str) -> None:
    with pytest.raises(Exception, match="lack column\\(s\\) region"):
        write_equality_deletes(spark, small_table, ["k"], [(1,)])
    assert _snapshots(spark, small_table) == 1


def test_global_deletes_need_an_unpartitioned_spec(spark: SparkSession, small_table: str) -> None:
    with pytest.raises(Exception, match="global equality deletes need an unpartitioned spec"):
        write_equality_deletes(spark, small_table, ["k"], [(1,)], global_deletes=True)


def test_nothing_to_commit(spark: SparkSession, small_table: str) -> None:
    with pytest.raises(Exception, match="nothing to commit"):
        write_equality_deletes(spark, small_table, ["k"], spark.table(small_table).where("false"))


def test_no_key_columns(spark: SparkSession, small_table: str) -> None:
    with pytest.raises(ValueError, match="at least one column"):
        write_equality_deletes(spark, small_table, [], [(1,)])
