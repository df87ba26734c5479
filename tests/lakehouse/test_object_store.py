"""eqdelete's reads, writes and checks go through each table's own FileIO, the one the REST catalog
configures with the table's S3 keys: the session holds no key of its own, and a delete file lost or
rewritten on the object store fails the query by name under every strategy, also after the filter's
index of it was kept from an earlier query (checked through the FileIO, not a local path)."""

from __future__ import annotations

import itertools

import pytest
from lakehouse.conftest import CATALOG
from fixtures import FIXTURES
from pyspark.sql import SparkSession

import eqdelete
from eqdelete.tools.lakehouse import Lakehouse

_names = itertools.count()


@pytest.fixture
def table(spark: SparkSession, lake: str) -> str:
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {lake}.store")
    return f"{lake}.store.t{next(_names)}"


def _eq_delete_paths(spark: SparkSession, table: str) -> list[str]:
    return [r[0] for r in spark.sql(f"SELECT file_path FROM {table}.delete_files WHERE content = 2").collect()]


def _damage(lakehouse: Lakehouse, location: str, how: str) -> None:
    """What someone with the bucket's keys could do to an object behind the table's back."""
    store, key = lakehouse.s3_filesystem(), lakehouse.object_key(location)
    if how == "missing":
        store.delete_file(key)
        return
    size = store.get_file_info(key).size
    with store.open_output_stream(key) as out:
        out.write(b"not a parquet file" * 10 if how == "corrupt" else b"\0" * size)


def test_the_session_holds_no_key_of_the_store(spark: SparkSession, lake: str, lakehouse: Lakehouse) -> None:
    settings = {k: v for k, v in spark.sparkContext.getConf().getAll()} | lakehouse.spark_options(lake)
    assert not [k for k in settings if "access" in k and "key" in k or "secret" in k or "credential" in k]
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()  # noqa: SLF001
    assert hadoop.get("fs.s3a.access.key") is None and hadoop.get("fs.s3.impl") is None


@pytest.mark.parametrize("strategy", ["filter", "join", "auto"])
def test_tables_spark_writes_on_the_store(spark: SparkSession, table: str, strategy: str) -> None:
    fixture = FIXTURES["upserts_and_reinserts"](spark, table)
    assert all(p.startswith("s3://lake/warehouse/") for p in _eq_delete_paths(spark, table))
    settings = [("spark.eqdelete.strategy", strategy), ("spark.eqdelete.auto.minDataRows", "0")]
    with eqdelete.use_conf(spark, settings):
        df = spark.table(table)
        assert sorted(tuple(r) for r in df.collect()) == sorted(fixture.expected)
        [decision] = eqdelete.decisions(df)
    assert decision.strategy == ("filter" if strategy == "auto" else strategy) and decision.delete_files == 3


@pytest.mark.parametrize("damage", ["missing", "corrupt", "same-size"])
@pytest.mark.parametrize("strategy", ["filter", "join"])
def test_a_delete_file_damaged_on_the_store_fails_by_name(spark: SparkSession, lakehouse: Lakehouse, table: str,
                                                          damage: str, strategy: str) -> None:
    # Read once intact: the filter strategy keeps its index, and must still notice the damage.
    FIXTURES["single_key"](spark, table)
    [path] = _eq_delete_paths(spark, table)
    with eqdelete.use_strategy(spark, strategy):
        assert spark.table(table).count() == 7
        _damage(lakehouse, path, damage)
        with pytest.raises(Exception) as error:
            spark.table(table).collect()
    assert f"eqdelete: cannot read equality delete file {path}" in str(error.value)


def test_resolve_and_maintain_commit_through_the_catalog(spark: SparkSession, lakehouse: Lakehouse, table: str) -> None:
    from pyiceberg.catalog import load_catalog

    fixture = FIXTURES["mixed_position_and_equality"](spark, table, version=3)
    first = eqdelete.maintain_round(spark, table)
    assert first.committed and first.deletion_vectors_written >= 1 and first.equality_delete_files_live == 0
    dvs = spark.sql(f"SELECT file_path, file_format FROM {table}.delete_files").collect()
    assert dvs and all(r.file_format == "PUFFIN" and r.file_path.startswith("s3://lake/") for r in dvs)
    catalog = load_catalog(CATALOG, **lakehouse.pyiceberg_properties())
    name = table.split(".", 1)[1]
    assert catalog.load_table(name).current_snapshot().snapshot_id == first.snapshot_id
    rows = catalog.load_table(name).scan().to_arrow().to_pylist()
    assert sorted((r["k"], r["v"]) for r in rows) == sorted(fixture.expected)
