"""What a rewritten scan shows in Spark's SQL metrics, read from Spark's status store (what the
UI and its REST API serve): Iceberg's own scan metrics stay, as a native read shows them; the
filter's index says what it held and cost, whether it was kept from an earlier query, and the
rows it removed; the join's delete side the delete rows read and the rows the join removed."""

from __future__ import annotations

import pytest
from fixtures import FIXTURES
from pyspark.sql import SparkSession

import eqdelete

#: Iceberg's scan metrics from its planning report (SparkScan.reportDriverMetrics).
PLANNING = ("equalityDeleteFiles", "totalPlanningDuration", "totalDataFileSize", "resultDataFiles")


def scan_metrics(spark: SparkSession, sql: str, node_name: str = "BatchScan") -> dict[str, list[int]]:
    """Run ``sql``; the metrics of its nodes named ``node_name`` (Iceberg's scans by default) from
    Spark's status store: metric name (as Spark's UI labels it) to the values of every such node."""
    jsession = spark._jsparkSession  # noqa: SLF001
    store = jsession.sharedState().statusStore()
    executions = store.executionsList()
    before = {executions.apply(i).executionId() for i in range(executions.size())}
    spark.sql(sql).collect()
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty()  # noqa: SLF001
    executions = store.executionsList()
    found: dict[str, list[int]] = {}
    for i in range(executions.size()):
        execution = executions.apply(i)
        if execution.executionId() in before:
            continue
        values = store.executionMetrics(execution.executionId())
        nodes = store.planGraph(execution.executionId()).allNodes()
        for n in range(nodes.size()):
            node = nodes.apply(n)
            if node_name not in node.name():
                continue
            metrics = node.metrics()
            for m in range(metrics.size()):
                metric = metrics.apply(m)
                value = values.get(metric.accumulatorId())
                if value.isDefined():
                    found.setdefault(str(metric.name()), []).append(_number(str(value.get())))
    return found


def _number(text: str) -> int:
    """A metric as the store formats it ('10', '1,234', '567 ms', '4.6 MiB' ...), as a number > 0 or 0."""
    head = text.split("\n")[-1].split("(")[0].strip().split(" ")[0].replace(",", "")
    try:
        return int(float(head) * (1 if head else 0))
    except ValueError:
        return 0


def _named(metrics: dict[str, list[int]], label: str) -> list[int]:
    """The values of the metric whose UI label names ``label`` (Iceberg labels them in words)."""
    words = {
        "equalityDeleteFiles": "equality delete files",
        "totalPlanningDuration": "total planning duration",
        "totalDataFileSize": "total data file size",
        "resultDataFiles": "result data files",
    }[label]
    return [v for name, vs in metrics.items() if words in name.lower() for v in vs]


@pytest.mark.parametrize("strategy", ["filter", "join"])
def test_a_rewritten_scan_keeps_icebergs_scan_metrics(spark: SparkSession, table_name: str, strategy: str) -> None:
    FIXTURES["two_equality_sets"](spark, table_name)
    query = f"SELECT count(*) FROM {table_name}"
    with eqdelete.use_strategy(spark, "native"):
        native = scan_metrics(spark, query)
    with eqdelete.use_strategy(spark, strategy):
        first = scan_metrics(spark, query)
        again = scan_metrics(spark, query)  # its deletes' planning kept from the first: served, reported again
    for label in PLANNING:
        assert max(_named(native, label), default=0) > 0, f"native shows no {label}: {native}"
        for rewritten in (first, again):
            assert max(_named(rewritten, label), default=0) > 0, f"{strategy} shows no {label}: {rewritten}"
    assert max(_named(first, "equalityDeleteFiles")) == max(_named(native, "equalityDeleteFiles")) == 2


def test_the_filters_index_reports_what_it_held_and_whether_it_was_kept(spark: SparkSession, table_name: str) -> None:
    FIXTURES["single_key"](spark, table_name)  # 4 delete rows on k, one file
    query = f"SELECT count(*) FROM {table_name}"
    with eqdelete.use_strategy(spark, "filter"):
        built = scan_metrics(spark, query, "BuildDeleteKeyIndex")
        kept = scan_metrics(spark, query, "BuildDeleteKeyIndex")
    assert built["delete rows of the index"] == [4] and built["distinct keys in the index"] == [4], built
    assert built["index kept from an earlier query (1) or built (0)"] == [0]
    assert kept["index kept from an earlier query (1) or built (0)"] == [1], kept
    for run in (built, kept):
        assert run["data rows removed by the index"] == [removed_rows(spark, table_name)], run
        assert run["index size in memory"][0] > 0, run


def removed_rows(spark: SparkSession, table: str) -> int:
    """Rows of the data files that the table's equality deletes remove (the fixtures have no position deletes)."""
    data = spark.sql(f"SELECT sum(record_count) FROM {table}.files WHERE content = 0").first()[0]
    with eqdelete.use_strategy(spark, "native"):
        return data - spark.table(table).count()


@pytest.mark.parametrize("distribution", ["broadcast", "shuffled"])
def test_the_joins_delete_side_reports_the_rows_read_and_removed(spark: SparkSession, table_name: str,
                                                                 distribution: str) -> None:
    FIXTURES["two_equality_sets"](spark, table_name)  # 2 delete rows on id, 1 on (name, day); 4 rows removed
    settings = [("spark.eqdelete.strategy", "join")]
    if distribution == "shuffled":
        settings.append(("spark.eqdelete.join.broadcastMaxBytes", "0"))
    with eqdelete.toggles.use_conf(spark, settings):
        metrics = scan_metrics(spark, f"SELECT count(*) FROM {table_name}", "EqualityDeleteRows")
        [decision] = eqdelete.last_decisions(spark)
    assert f"{distribution} anti join" in decision.plan, decision.plan
    # One delete side per equality set; each join counts the rows it removes, first to delete a row counts it.
    assert sorted(metrics["delete rows read"]) == [1, 2], metrics
    assert sum(metrics["data rows removed by the join"]) == removed_rows(spark, table_name) == 4, metrics
