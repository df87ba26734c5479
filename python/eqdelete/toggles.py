"""Strategy toggles for a running session: a setter and a context manager."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.sql import SparkSession

from eqdelete import _jvm

ENABLED_KEY = "spark.eqdelete.enabled"
STRATEGY_KEY = "spark.eqdelete.strategy"


def set_strategy(spark: SparkSession, strategy: str) -> None:
    """Set spark.eqdelete.strategy; the JVM rejects an unknown value, naming the allowed ones."""
    spark.conf.set(STRATEGY_KEY, strategy)


def get_strategy(spark: SparkSession) -> str:
    """The strategy in force, as the extension reads it (normalised, default applied)."""
    return _jvm.effective_strategy(spark)


def set_enabled(spark: SparkSession, enabled: bool) -> None:
    spark.conf.set(ENABLED_KEY, "true" if enabled else "false")


@contextmanager
def use_strategy(spark: SparkSession, strategy: str) -> Iterator[None]:
    """Run a block under ``strategy``, then restore the session's previous setting."""
    previous = spark.conf.get(STRATEGY_KEY, None)
    set_strategy(spark, strategy)
    try:
        yield
    finally:
        if previous is None:
            spark.conf.unset(STRATEGY_KEY)
        else:
            spark.conf.set(STRATEGY_KEY, previous)
