"""Every fixture x {filter, join} x query shape gives exactly Iceberg's native rows."""

from __future__ import annotations

import pytest
from fixtures import FIXTURES, Fixture
from oracle import check_against_native
from pyspark.sql import SparkSession

SHAPES = {
    "all_columns": "SELECT * FROM {t}",
    "keys_not_projected": "SELECT {v} FROM {t}",
    "filtered": "SELECT * FROM {t} WHERE {v} IS NOT NULL AND cast({v} AS STRING) <> 'no such value'",
    "aggregated": "SELECT count(*) AS n, count({v}) AS nv, count(DISTINCT {v}) AS d FROM {t}",
    "joined": "SELECT a.*, b.{v} AS other FROM {t} a JOIN {dim} b ON a.{v} = b.{v}",
}


@pytest.fixture(scope="module")
def built(spark: SparkSession) -> dict[str, tuple[Fixture, str]]:
    """Each fixture once per module, with a delete-free copy to join against."""
    spark.sql("CREATE NAMESPACE IF NOT EXISTS local.rw")
    tables = {}
    for i, (name, build) in enumerate(sorted(FIXTURES.items())):
        fixture = build(spark, f"local.rw.{name}")
        dim = f"local.rw.{name}_dim"
        spark.sql("SET spark.eqdelete.strategy=native")
        spark.sql(f"CREATE TABLE {dim} USING iceberg AS SELECT * FROM {fixture.table}")
        spark.sql("RESET spark.eqdelete.strategy")
        tables[name] = (fixture, dim)
    return tables


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_strategies_match_native(spark: SparkSession, built, name: str, shape: str) -> None:
    fixture, dim = built[name]
    sql = SHAPES[shape].format(t=fixture.table, v=fixture.value_column, dim=dim)
    check_against_native(spark, lambda: spark.sql(sql), expect_rewrites=1)
