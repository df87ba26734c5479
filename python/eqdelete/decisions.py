"""What eqdelete decided for each Iceberg scan of a query: strategy, reason, sizes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from eqdelete import _jvm, _remote


@dataclass(frozen=True)
class Decision:
    """One Iceberg scan eqdelete looked at. ``strategy`` is 'native' when it left the scan alone.

    ``plan`` says how the scan is read: its layout and, for each delete part, the index or
    join that applies it with its read tasks (the same plan EXPLAIN shows).

    ``covered_delete_rows``: delete rows of multi-column equality sets that eqdelete dropped
    because a single-column delete on one of their columns, as new or newer and in the same
    partition or global, deletes those rows already. They are counted as the deletes are read,
    so it is None before the query runs (``decisions``) and when the plan covers nothing.
    """

    table: str
    snapshot_id: int
    strategy: str
    reason: str
    plan: str
    delete_files: int
    delete_rows: int
    data_files: int
    data_files_with_deletes: int
    covered_delete_rows: int | None = None

    @property
    def rewritten(self) -> bool:
        return self.strategy != "native"


def _records(raw: list[dict[str, Any]]) -> list[Decision]:
    return [Decision(**{k: r[k] for k in Decision.__dataclass_fields__}) for r in raw]


def decisions(df: DataFrame) -> list[Decision]:
    """The decisions in ``df``'s optimized plan (the query is planned, not run).

    On Spark Connect, those of a query over a temporary view of ``df``
    (``SELECT * FROM eqdelete_decisions(...)`` on the server)."""
    if _remote.is_remote(df):
        with _remote.temp_view(df) as view:
            query = _remote.literal(f"SELECT * FROM `{view}`")
            return _records(_remote.function_rows(df.sparkSession, f"SELECT * FROM eqdelete_decisions({query})"))
    try:
        found = _records(_jvm.plan_decisions(df))
    except Exception as error:  # e.g. no eqdelete classes in the JVM at all
        if not _remote.has_extension(df.sparkSession):
            raise _remote.not_loaded_error(df.sparkSession) from error
        raise
    if not found and not _remote.has_extension(df.sparkSession):  # the jar is there, standing aside
        raise _remote.not_loaded_error(df.sparkSession)
    return found


def last_decisions(spark: SparkSession) -> list[Decision]:
    """The decisions of the last query ``spark`` ran, one per Iceberg scan looked at
    (``SELECT * FROM eqdelete_last_decisions()``, which is not itself counted as a query)."""
    return _records(_remote.function_rows(spark, "SELECT * FROM eqdelete_last_decisions()"))
