"""The changes of a table: the rows each snapshot of a range inserted and deleted, also where
the table has equality deletes (Iceberg's changelog scans refuse delete files). Served on the JVM
by ``SELECT * FROM eqdelete_changes('<table>', <start>, <end>)`` (also over Spark Connect);
docs/changes.md gives the semantics."""

from __future__ import annotations

from typing import Optional

from pyspark.sql import DataFrame, SparkSession

from eqdelete import _remote

#: The columns after the table's own, as Iceberg's changelog view names them.
CHANGE_COLUMNS = ("_change_type", "_change_ordinal", "_commit_snapshot_id")


def changes(spark: SparkSession, table: str, *, start_snapshot_id: Optional[int] = None,
            end_snapshot_id: Optional[int] = None) -> DataFrame:
    """The rows each snapshot of ``table`` after ``start_snapshot_id`` (exclusive; None: from its
    first) up to ``end_snapshot_id`` (inclusive; None: the current) inserted and deleted, as a
    DataFrame of the table's columns (in the schema of the range's end) and ``_change_type``
    (``INSERT`` or ``DELETE``), ``_change_ordinal`` (the snapshot's place in the range, from 0)
    and ``_commit_snapshot_id``. A snapshot's changes are the difference between its rows and
    its parent's: an upsert of a new key is one INSERT, a row deleted and re-inserted identically
    in one snapshot no change, compactions and resolves nothing."""
    if not isinstance(table, str) or not table.strip():
        raise ValueError(f"table must be a table name such as 'lake.db.orders', not {table!r}")
    bounds = []
    for name, value in (("start_snapshot_id", start_snapshot_id), ("end_snapshot_id", end_snapshot_id)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise ValueError(f"{name} must be a snapshot id (an int) or None, not {value!r}")
        bounds.append("NULL" if value is None else f"{value}L")
    return spark.sql(f"SELECT * FROM eqdelete_changes({_remote.literal(table)}, {', '.join(bounds)})")
