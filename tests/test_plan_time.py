"""Optimizing a plan reads metadata only; execution reads the data; the plan is one typed decision."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

import eqdelete
from fixtures import FIXTURES, sorted_rows
from plans import anti_joins, jobs_run_by, node_names, optimized

# auto at small sizes: the thresholds that make it pick the filter, or the join.
AUTO_FILTER = [("spark.eqdelete.strategy", "auto"), ("spark.eqdelete.auto.minDataRows", "0")]
AUTO_JOIN = AUTO_FILTER + [("spark.eqdelete.auto.filterMaxDeleteRows", "0")]
SETTINGS = {
    "filter": [("spark.eqdelete.strategy", "filter")],
    "join": [("spark.eqdelete.strategy", "join")],
    "auto-filter": AUTO_FILTER,
    "auto-join": AUTO_JOIN,
    "auto-native": [("spark.eqdelete.strategy", "auto")],
}


@pytest.mark.parametrize("setting", sorted(SETTINGS))
def test_explain_and_decisions_run_no_job(spark: SparkSession, table_name: str, setting: str) -> None:
    fixture = FIXTURES["two_equality_sets"](spark, table_name)
    query = f"SELECT * FROM {table_name} WHERE v > 1"
    with eqdelete.use_conf(spark, SETTINGS[setting]):
        df = spark.sql(query)
        assert jobs_run_by(spark, lambda: spark.sql(f"EXPLAIN EXTENDED {query}").collect()) == 0
        assert jobs_run_by(spark, lambda: eqdelete.decisions(df)) == 0
        assert jobs_run_by(spark, lambda: df._jdf.queryExecution().executedPlan()) == 0  # noqa: SLF001
        (decision,) = eqdelete.decisions(df)
        expected = {"filter": "filter", "join": "join", "auto-filter": "filter", "auto-join": "join",
                    "auto-native": "native"}[setting]
        assert decision.strategy == expected, decision
        rows = df.collect()
    assert sorted_rows(rows) == sorted_rows([r for r in fixture.expected if r[3] > 1])


def test_filter_index_is_a_subquery_built_when_the_query_runs(spark: SparkSession, table_name: str) -> None:
    FIXTURES["two_equality_sets"](spark, table_name)
    with eqdelete.use_strategy(spark, "filter"):
        df = spark.table(table_name)
        names = node_names(optimized(df))
        # One index per equality set, each the plan of a scalar subquery the filter waits on.
        assert names["BuildDeleteKeyIndex"] == 2, names
        assert names["Join"] == 0, names
        explained = spark.sql(f"EXPLAIN SELECT * FROM {table_name}").first()[0]
        # (id)'s deletes are global and newer than every data file, its keys dense: a key bitmap.
        assert "BuildDeleteKeyIndex key bitmap index of (id)" in explained, explained
        assert "BuildDeleteKeyIndex index of (name, day)" in explained, explained
        assert jobs_run_by(spark, df.collect) >= 2  # the index jobs, then the scan


def test_join_parts_follow_the_broadcast_limit_one_by_one(spark: SparkSession, table_name: str) -> None:
    # One equality set (k) with a global part (1 row, ~32 bytes) and a scoped part (2 rows, ~64
    # bytes): a limit between them broadcasts the one and shuffles the other.
    fixture = FIXTURES["global_after_spec_change"](spark, table_name)
    with eqdelete.use_conf(spark, [("spark.eqdelete.strategy", "join"), ("spark.eqdelete.join.broadcastMaxBytes", "48")]):
        df = spark.table(table_name)
        joins = anti_joins(optimized(df))
        # Scoped (shuffled) and global (broadcast), each delete side joined as read, never aggregated.
        assert sorted(joins) == [(False, False), (True, False)], joins
        (decision,) = eqdelete.decisions(df)
        assert "shuffled anti join on (k) and partition" in decision.plan, decision.plan
        assert "broadcast anti join on (k) (global deletes)" in decision.plan, decision.plan
        assert "broadcast for (k) global" in decision.reason or decision.reason == "spark.eqdelete.strategy=join"
        assert sorted_rows(df.collect()) == sorted_rows(fixture.expected)

    with eqdelete.use_conf(spark, AUTO_JOIN + [("spark.eqdelete.join.broadcastMaxBytes", "48")]):
        (decision,) = eqdelete.decisions(spark.table(table_name))
        # auto's reason names each part's side, as the plan has it.
        assert "broadcast for (k) global" in decision.reason and "shuffled for (k) scoped" in decision.reason, decision
