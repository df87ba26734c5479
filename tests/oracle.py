"""The oracle: a query's rows under each eqdelete strategy equal Iceberg's native rows."""

from __future__ import annotations

from typing import Callable

from fixtures import sorted_rows
from pyspark.sql import DataFrame, SparkSession

import eqdelete
from eqdelete import Decision

REWRITING = ("filter", "join")


def check_against_native(
    spark: SparkSession,
    query: Callable[[], DataFrame],
    strategies: tuple[str, ...] = REWRITING,
    expect_rewrites: int | None = None,
) -> dict[str, list[Decision]]:
    """Run ``query`` natively and under each strategy; assert equal rows; return decisions.

    With ``expect_rewrites``, also assert how many scans each strategy rewrote with itself.
    """
    with eqdelete.use_strategy(spark, "native"):
        expected = sorted_rows(query().collect())
    decisions: dict[str, list[Decision]] = {}
    for strategy in strategies:
        with eqdelete.use_strategy(spark, strategy):
            df = query()
            actual = sorted_rows(df.collect())
            decisions[strategy] = eqdelete.decisions(df)
        assert actual == expected, f"{strategy} differs from native: {actual} != {expected}"
        if expect_rewrites is not None:
            used = [d for d in decisions[strategy] if d.strategy == strategy]
            assert len(used) == expect_rewrites, f"{strategy}: {decisions[strategy]}"
    return decisions
