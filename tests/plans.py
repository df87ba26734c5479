"""Plan shapes, read structurally from the JVM's plan trees (never from EXPLAIN's text)."""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterator

from pyspark.sql import DataFrame, SparkSession


def _seq(jseq: Any) -> list[Any]:
    return [jseq.apply(i) for i in range(jseq.size())]


def nodes(plan: Any) -> Iterator[Any]:
    """Every node of a Catalyst plan (logical or physical), its subqueries' plans included."""
    yield plan
    for child in _seq(plan.children()) + _seq(plan.innerChildren()):
        yield from nodes(child)


def physical_nodes(plan: Any) -> Iterator[Any]:
    """Every node of a physical plan as it ran: through adaptive execution's current plan and its
    query stages, where a Spark line does not list them as inner children."""
    yield plan
    inner = _seq(plan.innerChildren())
    name = str(plan.getClass().getSimpleName())
    if not inner and name == "AdaptiveSparkPlanExec":
        inner = [plan.executedPlan()]
    elif not inner and name.endswith("QueryStageExec"):
        inner = [plan.plan()]
    for child in _seq(plan.children()) + inner:
        yield from physical_nodes(child)


def optimized(df: DataFrame) -> Any:
    return df._jdf.queryExecution().optimizedPlan()  # noqa: SLF001


def executed(df: DataFrame) -> Any:
    return df._jdf.queryExecution().executedPlan()  # noqa: SLF001


def node_names(plan: Any) -> Counter[str]:
    """How many nodes of each name a plan has (``Join``, ``Aggregate``, ``BuildDeleteKeyIndex`` ...)."""
    return Counter(str(node.nodeName()) for node in nodes(plan))


def anti_joins(plan: Any) -> list[tuple[bool, bool]]:
    """(broadcast hint, aggregated delete side) of every left anti join of a logical plan."""
    found = []
    for node in nodes(plan):
        if str(node.nodeName()) == "Join" and str(node.joinType()) == "LeftAnti":
            aggregated = any(str(n.nodeName()) == "Aggregate" for n in nodes(node.right()))
            found.append(("broadcast" in str(node.hint()).lower(), aggregated))
    return found


def jobs_run_by(spark: SparkSession, action) -> int:  # noqa: ANN001
    """How many Spark jobs ``action()`` starts, counted through the status tracker."""
    sc = spark.sparkContext
    group = f"eqdelete-count-{id(action)}"
    sc.setJobGroup(group, "counting jobs")
    try:
        action()
    finally:
        sc._jsc.clearJobGroup()  # noqa: SLF001
    return len(sc.statusTracker().getJobIdsForGroup(group))
