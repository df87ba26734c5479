"""The smoke suite, run on every pair of the support matrix (``scripts/test.sh --pair 3.5:1.11``):
each fixture under filter, join and auto against native and the rows written by hand, EXPLAIN,
the decision records, the versions the session reports, resolving equality deletes, both
procedures through ``CALL``, and a table's changes (``eqdelete_changes``)."""

from __future__ import annotations

import re
from pathlib import Path

import pyspark
import pytest
from conftest import ICEBERG_VERSION
from fixtures import FIXTURES, sorted_rows
from oracle import check_against_native
from pyspark.sql import SparkSession

import eqdelete
from eqdelete import _jars

STRATEGIES = ("filter", "join", "auto")


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_fixture_under_every_strategy(spark: SparkSession, table_name: str, name: str) -> None:
    fixture = FIXTURES[name](spark, table_name)
    query = lambda: spark.table(table_name)  # noqa: E731
    with eqdelete.toggles.use_conf(spark, [("spark.eqdelete.auto.minDataRows", "0")]):
        decisions = check_against_native(spark, query, strategies=STRATEGIES)
        for strategy in STRATEGIES:
            used = "filter" if strategy == "auto" else strategy  # tiny delete sets: auto filters
            assert [d.strategy for d in decisions[strategy]] == [used], decisions[strategy]
            with eqdelete.use_strategy(spark, strategy):
                plan = spark.sql(f"EXPLAIN SELECT * FROM {table_name}").first()[0]
                assert f"[eqdelete {used}: " in plan, plan
                assert sorted_rows(query().collect()) == sorted_rows(fixture.expected)
                spark.table(table_name).count()
                (last,) = eqdelete.last_decisions(spark)
                assert (last.table, last.strategy) == (table_name, used)


def test_versions_in_use(spark: SparkSession) -> None:
    line = _jars.supported_line()
    assert line is not None
    iceberg = ICEBERG_VERSION or line.default_iceberg
    described = spark.sql("SELECT eqdelete_version()").first()[0]
    assert described == f"{eqdelete.__version__} (Spark {pyspark.__version__}, Iceberg {iceberg})"
    jars = spark.sparkContext.getConf().get("spark.jars")
    assert line.extension_jar_name(eqdelete.__version__) in jars
    assert re.search(rf"iceberg-spark-runtime-{line.spark}_{line.scala}-{re.escape(iceberg)}\.jar", jars), jars


def test_nested_and_floating_point_keys_against_written_rows(spark: SparkSession, table_name: str) -> None:
    # Where Iceberg's own reader is wrong (docs/known-iceberg-issues.md): checked against the
    # rows the test wrote, on every pair.
    from test_key_types import NESTED_QUERIES, STRATEGIES as SETTINGS, _nested_table, multiset

    live = _nested_table(spark, table_name)
    for strategy, settings in SETTINGS.items():
        with eqdelete.use_conf(spark, settings):
            for name, (sql, expected) in NESTED_QUERIES.items():
                assert multiset(spark.sql(sql.format(t=table_name)).collect()) == multiset(expected(live)), (name, strategy)
    floating = f"{table_name}_f"
    spark.sql(f"CREATE TABLE {floating} (f DOUBLE, v INT) USING iceberg "
              "TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read')")
    rows = [(float("nan"), 1), (5.0, 2), (-0.0, 3), (0.0, 4)]
    spark.createDataFrame(rows, spark.table(floating).schema).coalesce(1).writeTo(floating).append()
    eqdelete.write_equality_deletes(spark, floating, ["f"], [(float("nan"),), (1.0,), (0.0,)])
    for strategy, settings in SETTINGS.items():
        with eqdelete.use_conf(spark, settings):
            assert multiset(spark.table(floating).collect()) == multiset([(5.0, 2), (-0.0, 3)]), strategy


def test_uuid_keys_against_written_rows(spark: SparkSession, table_name: str) -> None:
    # Iceberg pairs uuid deletes with data files by bounds it compares signed
    # (docs/known-iceberg-issues.md): on every pair, eqdelete applies them, and after a resolve
    # Iceberg's own reader agrees. Whether Iceberg's reader misses them is recorded, not asserted, here.
    from test_key_types import STRATEGIES as SETTINGS, multiset, uuid_case_table

    live = uuid_case_table(spark, table_name, "straddling, middle deleted")
    for strategy, settings in SETTINGS.items():
        with eqdelete.use_conf(spark, settings):
            assert multiset(spark.table(table_name).collect()) == multiset(live), strategy
    eqdelete.resolve_equality_deletes(spark, table_name)
    with eqdelete.use_strategy(spark, "native"):
        assert multiset(spark.table(table_name).collect()) == multiset(live), "natively after resolving"


@pytest.mark.parametrize("version", [2, 3])
def test_resolving_equality_deletes(spark: SparkSession, table_name: str, version: int) -> None:
    # Iceberg's writers and RowDelta as this pair has them: position deletes (v2), deletion
    # vectors merged with the DELETE's (v3), against the modelled rows.
    from test_resolve import build, eq_delete_files, native_rows

    history = build(spark, table_name, version)
    result = eqdelete.resolve_equality_deletes(spark, table_name)
    assert result.committed and result.rows_resolved == history.model.resolvable()
    assert eq_delete_files(spark, table_name) == 0
    assert native_rows(spark, table_name) == history.model.live()
    assert not eqdelete.resolve_equality_deletes(spark, table_name).committed


def test_procedures_in_sql(spark: SparkSession, table_name: str) -> None:
    # CALL of eqdelete's procedures on every line: Spark 4.x's own CALL; on Spark 3.5 eqdelete's
    # parser, beside Iceberg's SQL extensions (which still serve Iceberg's own procedures).
    from test_resolve import eq_delete_files, snapshot

    t = table_name
    spark.sql(f"CREATE TABLE {t} (k BIGINT, v STRING) USING iceberg "
              "TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read')")
    spark.sql(f"INSERT INTO {t} SELECT id, CAST(id AS STRING) FROM range(1, 7)")
    [written] = spark.sql(
        f"CALL eqdelete.system.write_equality_deletes(table => '{t}', key_columns => array('k'), "
        "deletes => 'SELECT id AS k FROM range(2, 5, 2)', inserts => 'SELECT 7L AS k, \\'7\\' AS v', "
        "files_per_partition => 1)").collect()
    assert (written.snapshot_id, written.data_files, written.delete_files) == (snapshot(spark, t), 1, 1)
    live = [(k, str(k)) for k in (1, 3, 5, 6, 7)]
    for strategy in STRATEGIES:
        with eqdelete.use_strategy(spark, strategy):
            assert sorted_rows(spark.table(t).collect()) == live, strategy
    [dry] = spark.sql(f"/* positional /* nested */ */ CALL eqdelete.system.resolve_equality_deletes('{t}', NULL, true); "
                      "-- after").collect()
    assert (dry.dry_run, dry.snapshot_id, dry.rows_resolved) == (True, None, 2)
    [row] = spark.sql(f"CALL eqdelete.system.resolve_equality_deletes(table => '{t}')").collect()
    assert row.snapshot_id == snapshot(spark, t) and row.equality_delete_files_removed == 1
    assert eq_delete_files(spark, t) == 0 and sorted_rows(spark.table(t).collect()) == live
    # Iceberg's own procedures are still Iceberg's, a sort order parsed by Iceberg's parser too.
    catalog, rest = t.split(".", 1)
    spark.sql(f"CALL {catalog}.system.rewrite_data_files(table => '{rest}', strategy => 'sort', "
              "sort_order => 'k DESC NULLS LAST', options => map('rewrite-all', 'true'))").collect()
    assert sorted_rows(spark.table(t).collect()) == live
    with pytest.raises(Exception, match="nothing"):
        spark.sql("CALL eqdelete.system.nothing()").collect()
    if pyspark.__version__.startswith("3."):  # the arguments as eqdelete's parser binds them
        for arguments, message in [
            (f"table => '{t}', dry_run => 'yes'", "dry_run must be boolean, not string"),
            (f"'{t}', table => '{t}'", "table is given both by position and by name"),
            (f"table => '{t}', dry_run => true, dry_run => false", "argument dry_run is given twice"),
            (f"table => '{t}', tables => 'x'", "has no parameter tables"),
            ("dry_run => true", "needs argument table"),
            (f"table => '{t}', true", "cannot follow a named one"),
            (f"DISTINCT '{t}'", "takes a plain argument list"),
            (f"'{t}') FROM (SELECT 1 AS x", "takes a plain argument list"),
        ]:
            with pytest.raises(Exception, match=message):
                spark.sql(f"CALL eqdelete.system.resolve_equality_deletes({arguments})").collect()


def test_changes_of_a_fixture(spark: SparkSession, table_name: str) -> None:
    # The changes (eqdelete_changes) of each snapshot, against the difference of its rows and its parent's.
    from test_changes import check_changes

    FIXTURES["mixed_position_and_equality"](spark, table_name)
    check_changes(spark, table_name, "auto")


def test_changes_stream_of_a_fixture(spark: SparkSession, table_name: str, tmp_path: Path) -> None:
    # The stream of them (format "eqdelete-changes"), a file a micro-batch: applied in order, they
    # rebuild every snapshot; and a second run of the same checkpoint finds nothing new.
    from test_changes_stream import replay, stream_batches

    FIXTURES["mixed_position_and_equality"](spark, table_name)
    batches = stream_batches(spark, table_name, tmp_path / "checkpoint", max_files_per_trigger=1)
    assert len(batches) > 1
    replay(spark, table_name, batches)
    assert stream_batches(spark, table_name, tmp_path / "checkpoint") == []


def test_a_running_changes_stream_never_makes_its_session_read_stale(spark: SparkSession, table_name: str,
                                                                     tmp_path: Path) -> None:
    # A notebook that streams a table's changes while writing to it: with the stream running, every
    # read of the session right after its own INSERT, DDL or equality deletes sees them, with no
    # REFRESH TABLE (the stream's source reads through an instance of its own, never the catalog's cache).
    import time

    spark.sql(f"CREATE TABLE {table_name} (k BIGINT, v STRING) USING iceberg "
              "TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read')")
    spark.sql(f"INSERT INTO {table_name} VALUES (0, 'a')")
    seen: list[int] = []
    query = (spark.readStream.format("eqdelete-changes").load(table_name).writeStream
             .foreachBatch(lambda df, _batch: seen.append(df.count()))
             .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(processingTime="200 milliseconds").start())
    try:
        query.processAllAvailable()
        stale = []
        for n in range(1, 11):
            spark.sql(f"INSERT INTO {table_name} VALUES ({n}, 'a')")
            if spark.sql(f"SELECT count(*) FROM {table_name}").first()[0] != n + 1:
                stale.append(n)
            time.sleep(0.3)
        assert stale == [], f"reads that missed the session's own INSERT: {stale}"
        query.processAllAvailable()
        assert sum(seen) == 11, seen
        # The changes applied to a copy in the same session: its next read sees them.
        copy = f"{table_name}_copy"
        spark.sql(f"CREATE TABLE {copy} (k BIGINT, v STRING) USING iceberg")
        spark.table(copy).count()  # cached by the session's catalog before the apply
        eqdelete.apply_changes(eqdelete.changes(spark, table_name), copy)
        assert spark.table(copy).count() == 11
        # A column added (the stream stops at the next snapshot, written in the new schema: its own concern).
        spark.sql(f"ALTER TABLE {table_name} ADD COLUMN w INT")
        time.sleep(0.3)
        assert spark.table(table_name).columns == ["k", "v", "w"]
        eqdelete.write_equality_deletes(spark, table_name, ["k"], [(1, None, None)], inserts=[(1, "b", 7)],
                                        columns=["k", "v", "w"])
        assert sorted(tuple(r) for r in spark.sql(f"SELECT * FROM {table_name} WHERE k = 1").collect()) == [(1, "b", 7)]
    finally:
        query.stop()
