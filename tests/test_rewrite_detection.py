"""Which reads are rewritten, how it shows, and what is never touched."""

from __future__ import annotations

import re

import pytest
from fixtures import FIXTURES, _create, _insert, sorted_rows
from oracle import check_against_native
from plans import node_names, optimized
from pyspark.sql import SparkSession

import eqdelete
from eqdelete import write_equality_deletes


@pytest.fixture
def table(spark: SparkSession, table_name: str) -> str:
    FIXTURES["upserts_and_reinserts"](spark, table_name)
    return table_name


@pytest.fixture
def other(spark: SparkSession) -> str:
    name = "local.t.other_with_deletes"
    if not spark.catalog.tableExists(name):
        FIXTURES["single_key"](spark, name)
    return name


@pytest.mark.parametrize(
    "sql, rewrites",
    [
        ("SELECT * FROM {t}", 1),
        ("SELECT v FROM {t} WHERE k > 1", 1),
        ("SELECT * FROM {t} WHERE k IN (SELECT k FROM {o})", 2),
        ("WITH c AS (SELECT * FROM {t}) SELECT count(*) FROM c", 1),
        ("SELECT a.k, a.v, b.v FROM {t} a JOIN {t} b ON a.k = b.k", 2),
        ("SELECT a.k, b.v FROM {t} a LEFT JOIN {o} b ON a.k = b.k", 2),
        ("SELECT k FROM {t} UNION ALL SELECT k FROM {o}", 2),
        ("SELECT (SELECT max(k) FROM {o}) AS m, count(*) FROM {t}", 2),
    ],
)
def test_sql_shapes(spark: SparkSession, table: str, other: str, sql: str, rewrites: int) -> None:
    check_against_native(spark, lambda: spark.sql(sql.format(t=table, o=other)), expect_rewrites=rewrites)


def test_dataframe_api_and_views(spark: SparkSession, table: str) -> None:
    check_against_native(spark, lambda: spark.table(table).where("v <> 'x'").select("v"), expect_rewrites=1)
    spark.sql(f"CREATE OR REPLACE TEMP VIEW eq_view AS SELECT k, v FROM {table}")
    check_against_native(spark, lambda: spark.table("eq_view"), expect_rewrites=1)


def test_time_travel_branches_and_tags(spark: SparkSession, table: str) -> None:
    snapshots = [r[0] for r in spark.sql(f"SELECT snapshot_id FROM {table}.snapshots ORDER BY committed_at").collect()]
    # After the first upsert: (1, v2) replaced (1, v1); (2, v1) and (3, v1) still there.
    after_upsert = snapshots[1]
    decisions = check_against_native(spark, lambda: spark.sql(f"SELECT * FROM {table} VERSION AS OF {after_upsert}"))
    assert [d.snapshot_id for d in decisions["join"]] == [after_upsert]
    with eqdelete.use_strategy(spark, "join"):
        rows = sorted_rows(spark.sql(f"SELECT * FROM {table} VERSION AS OF {after_upsert}").collect())
    assert rows == [(1, "v2"), (2, "v1"), (3, "v1")]

    spark.sql(f"ALTER TABLE {table} CREATE BRANCH audit AS OF VERSION {after_upsert}")
    spark.sql(f"ALTER TABLE {table} CREATE TAG before_reinsert AS OF VERSION {snapshots[2]}")
    check_against_native(spark, lambda: spark.sql(f"SELECT * FROM {table}.branch_audit"), expect_rewrites=1)
    check_against_native(spark, lambda: spark.sql(f"SELECT * FROM {table} VERSION AS OF 'audit'"), expect_rewrites=1)
    check_against_native(spark, lambda: spark.sql(f"SELECT * FROM {table}.tag_before_reinsert"), expect_rewrites=1)
    committed = spark.sql(f"SELECT committed_at FROM {table}.snapshots WHERE snapshot_id = {after_upsert}").first()[0]
    check_against_native(
        spark, lambda: spark.sql(f"SELECT * FROM {table} TIMESTAMP AS OF '{committed}'"), expect_rewrites=1
    )


def _plan_without_ids(df) -> str:
    return re.sub(r"#\d+L?", "", df._jdf.queryExecution().optimizedPlan().toString())


def test_tables_without_equality_deletes_keep_their_plan(spark: SparkSession, table_name: str) -> None:
    _create(spark, table_name, "k BIGINT, v STRING")
    _insert(spark, table_name, [(1, "a"), (2, "b")])
    spark.sql(f"DELETE FROM {table_name} WHERE k = 1")  # position deletes only
    query = lambda: spark.sql(f"SELECT * FROM {table_name} WHERE k > 0")  # noqa: E731
    with eqdelete.use_strategy(spark, "native"):
        native = _plan_without_ids(query())
    with eqdelete.use_strategy(spark, "join"):
        df = query()
        assert _plan_without_ids(df) == native
        assert [d.reason for d in eqdelete.decisions(df)] == ["no planned data file carries equality deletes"]
        assert sorted_rows(df.collect()) == [(2, "b")]


def test_partition_filter_avoiding_deleted_partitions_stays_native(spark: SparkSession, table_name: str) -> None:
    FIXTURES["partition_scoped"](spark, table_name)
    _insert(spark, table_name, [(7, "asia", "a7")])
    with eqdelete.use_strategy(spark, "filter"):
        df = spark.sql(f"SELECT * FROM {table_name} WHERE region = 'asia'")
        assert [d.strategy for d in eqdelete.decisions(df)] == ["native"]
        assert sorted_rows(df.collect()) == [(7, "asia", "a7")]
    check_against_native(spark, lambda: spark.sql(f"SELECT * FROM {table_name} WHERE region = 'eu'"), expect_rewrites=1)


def test_explain_names_the_rewrite(spark: SparkSession, table: str) -> None:
    for strategy in ("filter", "join"):
        with eqdelete.use_strategy(spark, strategy):
            plan = spark.sql(f"EXPLAIN SELECT * FROM {table}").first()[0]
            names = node_names(optimized(spark.table(table)))
        assert f"eqdelete {strategy}: 3 equality delete file(s), 3 delete row(s)" in plan
        # Files without deletes hold fewer rows than those with: one scan, no union.
        assert "files without equality deletes" not in plan and names["Union"] == 0, names
        # filter: one index subquery and no join; join: one anti join and no index.
        assert (names["BuildDeleteKeyIndex"], names["Join"]) == ((1, 0) if strategy == "filter" else (0, 1)), names


def test_last_decisions_describe_the_last_query(spark: SparkSession, table: str, other: str) -> None:
    with eqdelete.use_strategy(spark, "join"):
        spark.sql(f"SELECT * FROM {table} a JOIN {other} b ON a.k = b.k").collect()
        records = sorted(eqdelete.last_decisions(spark), key=lambda d: d.table)
    assert [(d.table, d.strategy) for d in records] == sorted([(table, "join"), (other, "join")])
    mine = next(d for d in records if d.table == table)
    assert (mine.delete_files, mine.delete_rows, mine.data_files_with_deletes) == (3, 3, 3)
    # 2 base files + 3 commits; the file of the plain re-insert of k=2 carries no applicable delete
    assert mine.data_files == 5 and mine.reason == "spark.eqdelete.strategy=join"
    snapshot = spark.sql(f"SELECT snapshot_id FROM {table}.snapshots ORDER BY committed_at DESC LIMIT 1").first()[0]
    assert mine.snapshot_id == snapshot


def test_auto_cost_model_picks_native_filter_broadcast_or_shuffled_join(spark: SparkSession, table: str) -> None:
    def auto_with(**settings: str) -> tuple[eqdelete.Decision, list]:
        keys = [(f"spark.eqdelete.{k.replace('_', '.', 1)}", v) for k, v in settings.items()]
        with eqdelete.use_conf(spark, [("spark.eqdelete.strategy", "auto"), *keys]):
            (decision,) = eqdelete.decisions(spark.table(table))
            return decision, sorted_rows(spark.table(table).collect())

    expected = [(1, "v4"), (2, "v3"), (3, "v1")]
    decision, rows = auto_with()
    assert decision.strategy == "native" and (decision.delete_files, decision.delete_rows) == (3, 3)
    assert "< spark.eqdelete.auto.minDataRows=200000" in decision.reason and rows == expected
    with eqdelete.use_strategy(spark, "auto"):
        plan = spark.sql(f"EXPLAIN SELECT * FROM {table}").first()[0]
        names = node_names(optimized(spark.table(table)))
    assert "[eqdelete native: auto: " in plan and names["Join"] == 0 and names["BuildDeleteKeyIndex"] == 0

    decision, rows = auto_with(auto_minDataRows="0")
    assert decision.strategy == "filter" and "3 delete rows <= spark.eqdelete.auto.filterMaxDeleteRows=30000000" in decision.reason
    assert rows == expected

    decision, rows = auto_with(auto_minDataRows="0", auto_filterMaxDeleteRows="2")
    assert decision.strategy == "join" and "3 delete rows > spark.eqdelete.auto.filterMaxDeleteRows=2" in decision.reason
    assert "broadcast" in decision.reason and rows == expected

    decision, rows = auto_with(auto_minDataRows="0", auto_filterMaxDeleteRows="2", join_broadcastMaxBytes="-1")
    assert decision.strategy == "join" and "shuffled" in decision.reason and rows == expected


def test_disabled_extension_rewrites_nothing(spark: SparkSession, table: str) -> None:
    eqdelete.set_enabled(spark, False)
    try:
        with eqdelete.use_strategy(spark, "join"):
            assert eqdelete.decisions(spark.table(table)) == []
    finally:
        spark.conf.unset("spark.eqdelete.enabled")


def test_a_dropped_key_column_stays_native_with_reason(spark: SparkSession, table_name: str) -> None:
    _create(spark, table_name, "k BIGINT, j BIGINT, v STRING")
    _insert(spark, table_name, [(1, 10, "a"), (2, 20, "b")])
    write_equality_deletes(spark, table_name, ["j"], [(10,)])
    spark.sql(f"ALTER TABLE {table_name} DROP COLUMN j")
    decisions = check_against_native(spark, lambda: spark.table(table_name))
    for records in decisions.values():
        (decision,) = records
        assert decision.strategy == "native" and "equality field id 2 is not a column of the schema read" in decision.reason


@pytest.mark.parametrize(
    "statement",
    [
        "DELETE FROM {t} WHERE k = 3",
        "UPDATE {t} SET v = 'updated' WHERE k >= 2",
        "MERGE INTO {t} t USING {s} s ON t.k = s.k "
        "WHEN MATCHED THEN UPDATE SET v = concat('m-', s.v) WHEN NOT MATCHED THEN INSERT *",
    ],
)
def test_row_level_commands_match_native(spark: SparkSession, table_name: str, statement: str) -> None:
    # The same command on twin tables, one under native and one under join, leaves the same rows.
    results = []
    for strategy in ("native", "join"):
        target, source = f"{table_name}_{strategy}", f"{table_name}_{strategy}_src"
        FIXTURES["upserts_and_reinserts"](spark, target)
        FIXTURES["single_key"](spark, source)  # a source with equality deletes of its own
        with eqdelete.use_strategy(spark, strategy):
            spark.sql(statement.format(t=target, s=source))
        with eqdelete.use_strategy(spark, "native"):
            results.append(sorted_rows(spark.table(target).collect()))
    assert results[0] == results[1]
