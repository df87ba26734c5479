"""Tables written with eqdelete's writer, read natively by Iceberg, give the expected rows."""

from __future__ import annotations

import pytest
from fixtures import FIXTURES, sorted_rows
from pyspark.sql import SparkSession

import eqdelete


def _delete_file_counts(spark: SparkSession, table: str) -> dict[int, int]:
    rows = spark.sql(f"SELECT content, count(*) AS n FROM {table}.delete_files GROUP BY content").collect()
    return {r["content"]: r["n"] for r in rows}


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_fixture_reads_expected_rows_natively(spark: SparkSession, table_name: str, name: str) -> None:
    fixture = FIXTURES[name](spark, table_name)
    with eqdelete.use_strategy(spark, "native"):
        actual = sorted_rows(spark.table(fixture.table).collect())
    assert actual == sorted_rows(fixture.expected)
    assert _delete_file_counts(spark, fixture.table).get(2, 0) >= 1, "no equality delete file was committed"


def test_mixed_table_has_position_and_equality_deletes(spark: SparkSession, table_name: str) -> None:
    FIXTURES["mixed_position_and_equality"](spark, table_name)
    counts = _delete_file_counts(spark, table_name)
    assert counts.get(1, 0) >= 1 and counts.get(2, 0) >= 1


def test_partition_scoped_delete_files_carry_their_partition(spark: SparkSession, table_name: str) -> None:
    FIXTURES["partition_scoped"](spark, table_name)
    partitions = {
        r["region"]
        for r in spark.sql(f"SELECT partition.region AS region FROM {table_name}.delete_files WHERE content = 2").collect()
    }
    assert partitions == {"eu", "us"}


def test_global_deletes_use_the_unpartitioned_spec(spark: SparkSession, table_name: str) -> None:
    FIXTURES["global_after_spec_change"](spark, table_name)
    specs = sorted(r["spec_id"] for r in spark.sql(f"SELECT spec_id FROM {table_name}.delete_files").collect())
    assert specs == [0, 1], "one global delete file under spec 0, one scoped under spec 1"


def test_two_equality_id_sets_in_one_table(spark: SparkSession, table_name: str) -> None:
    FIXTURES["two_equality_sets"](spark, table_name)
    sets = {tuple(r["equality_ids"]) for r in spark.sql(f"SELECT equality_ids FROM {table_name}.delete_files").collect()}
    assert sets == {(1,), (2, 3)}
