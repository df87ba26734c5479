"""Strategy toggles for a running session: setters and context managers."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager

from pyspark.sql import SparkSession

from eqdelete import _conf

ENABLED_KEY = "spark.eqdelete.enabled"
STRATEGY_KEY = "spark.eqdelete.strategy"


def set_strategy(spark: SparkSession, strategy: str) -> None:
    """Set spark.eqdelete.strategy; an unknown value raises ValueError naming the allowed ones."""
    _conf.check({STRATEGY_KEY: strategy})
    spark.conf.set(STRATEGY_KEY, strategy)


def get_strategy(spark: SparkSession) -> str:
    """The strategy in force, as the extension reads it: trimmed, lower case, the default when unset."""
    value = spark.conf.get(STRATEGY_KEY, None)
    return (value if value is not None else str(_conf.rules()[STRATEGY_KEY]["default"])).strip().lower()


def set_enabled(spark: SparkSession, enabled: bool) -> None:
    spark.conf.set(ENABLED_KEY, "true" if enabled else "false")


@contextmanager
def use_conf(spark: SparkSession, settings: Iterable[tuple[str, str]]) -> Iterator[None]:
    """Run a block with session ``settings`` (key, value pairs), then restore what each key held
    before (unset if it was unset)."""
    settings = list(settings)
    _conf.check(dict(settings))  # a bad value fails before anything is changed
    previous = {key: spark.conf.get(key, None) for key, _ in settings}
    try:
        for key, value in settings:
            spark.conf.set(key, value)
        yield
    finally:
        for key, value in previous.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def use_strategy(spark: SparkSession, strategy: str) -> AbstractContextManager[None]:
    """Run a block under ``strategy``, then restore the session's previous setting."""
    return use_conf(spark, [(STRATEGY_KEY, strategy)])
