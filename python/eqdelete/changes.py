"""The changes of a table: the rows each snapshot of a range inserted and deleted, also where
the table has equality deletes (Iceberg's changelog scans refuse delete files). Served on the JVM
by ``SELECT * FROM eqdelete_changes('<table>', <start>, <end>)`` (also over Spark Connect);
docs/changes.md gives the semantics. ``changes_stream`` reads them as a Structured Streaming
source, ``spark.readStream.format("eqdelete-changes")``."""

from __future__ import annotations

from datetime import datetime
from typing import Optional, Sequence, Union

from pyspark.sql import DataFrame, SparkSession

from eqdelete import _remote

#: The columns after the table's own, as Iceberg's changelog view names them.
CHANGE_COLUMNS = ("_change_type", "_change_ordinal", "_commit_snapshot_id")


def changes(spark: SparkSession, table: str, *, start_snapshot_id: Optional[int] = None,
            end_snapshot_id: Optional[int] = None, start_timestamp: Union[datetime, int, None] = None,
            end_timestamp: Union[datetime, int, None] = None, compute_updates: bool = False,
            identifier_columns: Optional[Sequence[str]] = None, net_changes: bool = False) -> DataFrame:
    """The rows each snapshot of ``table`` after ``start_snapshot_id`` (exclusive; None: from its
    first) up to ``end_snapshot_id`` (inclusive; None: the current) inserted and deleted, as a
    DataFrame of the table's columns (in the schema of the range's end) and ``_change_type``
    (``INSERT`` or ``DELETE``), ``_change_ordinal`` (the snapshot's place in the range, from 0)
    and ``_commit_snapshot_id``. A snapshot's changes are the difference between its rows and
    its parent's: an upsert of a new key is one INSERT, a row deleted and re-inserted identically
    in one snapshot no change, compactions and resolves nothing.

    The range by commit time instead: ``start_timestamp`` (the changes committed after it) and
    ``end_timestamp`` (up to it), a datetime or epoch milliseconds. ``compute_updates``: a
    snapshot's DELETE and INSERT of one identifier (``identifier_columns``, by default the
    table's identifier fields) become ``UPDATE_BEFORE`` and ``UPDATE_AFTER``. ``net_changes``:
    the net change of the whole range instead, each row tagged with its last change."""
    if not isinstance(table, str) or not table.strip():
        raise ValueError(f"table must be a table name such as 'lake.db.orders', not {table!r}")
    bounds = []
    for name, value in (("start_snapshot_id", start_snapshot_id), ("end_snapshot_id", end_snapshot_id)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise ValueError(f"{name} must be a snapshot id (an int) or None, not {value!r}")
        bounds.append("NULL" if value is None else f"{value}L")
    options = {}
    for key, value in (("start-timestamp", start_timestamp), ("end-timestamp", end_timestamp)):
        if value is not None:
            options[key] = str(_millis(key.replace("-", "_"), value))
    if compute_updates:
        options["compute_updates"] = "true"
    if net_changes:
        options["net_changes"] = "true"
    options.update(_identifier_option(identifier_columns))
    pairs = ", ".join(f"{_remote.literal(k)}, {_remote.literal(v)}" for k, v in options.items())
    return spark.sql(f"SELECT * FROM eqdelete_changes({_remote.literal(table)}, {', '.join(bounds)}, "
                     f"map({pairs}))")


#: The name of the streaming source, for ``spark.readStream.format``.
STREAM_FORMAT = "eqdelete-changes"


def changes_stream(spark: SparkSession, table: str, *, starting: Union[str, int, datetime] = "earliest",
                   max_files_per_trigger: Optional[int] = None, max_snapshots_per_trigger: Optional[int] = None,
                   compute_updates: bool = False, identifier_columns: Optional[Sequence[str]] = None) -> DataFrame:
    """The changes of ``table`` as a streaming DataFrame, micro-batch by micro-batch, in the
    columns of ``changes``; ``spark.readStream.format("eqdelete-changes").load(table)`` with
    these options. It reads along the table's current snapshot's ancestors, and its offsets
    are snapshots, so a checkpoint makes it exactly once.

    ``starting`` (where a stream without a checkpoint starts): ``"earliest"`` (from the table's
    first snapshot: every row an insert; when history expired, the oldest snapshot's rows and
    then its changes), ``"latest"`` (what is committed from now on), a snapshot id (its changes
    first) or a timezone-aware datetime (the first snapshot committed at or after it).
    ``max_files_per_trigger`` and ``max_snapshots_per_trigger`` bound a micro-batch (the files
    a snapshot's changes read; a large snapshot is split between batches, its deletes first).
    ``compute_updates`` and ``identifier_columns`` as in ``changes``."""
    if not isinstance(table, str) or not table.strip():
        raise ValueError(f"table must be a table name such as 'lake.db.orders', not {table!r}")
    options: dict[str, str] = {}
    if isinstance(starting, datetime):
        options["startingTimestamp"] = str(_millis("starting", starting))
    elif isinstance(starting, int) and not isinstance(starting, bool):
        options["startingSnapshotId"] = str(starting)
    elif starting in ("earliest", "latest"):
        options["startingOffsets"] = starting
    else:
        raise ValueError(f"starting must be 'earliest', 'latest', a snapshot id or a datetime, not {starting!r}")
    for name, value in (("maxFilesPerTrigger", max_files_per_trigger),
                        ("maxSnapshotsPerTrigger", max_snapshots_per_trigger)):
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int or None, not {value!r}")
            options[name] = str(value)
    if compute_updates:
        options["compute_updates"] = "true"
    options.update(_identifier_option(identifier_columns))
    return spark.readStream.format(STREAM_FORMAT).options(**options).load(table)


def _identifier_option(identifier_columns: Optional[Sequence[str]]) -> dict[str, str]:
    if identifier_columns is None:
        return {}
    if isinstance(identifier_columns, str) or not all(isinstance(c, str) and c for c in identifier_columns):
        raise ValueError(f"identifier_columns must be a list of column names, not {identifier_columns!r}")
    return {"identifier_columns": ",".join(identifier_columns)}


def _millis(name: str, value: Union[datetime, int]) -> int:
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError(f"{name} must be a timezone-aware datetime (or epoch milliseconds), not {value!r}")
        return int(value.timestamp() * 1000)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be a datetime or epoch milliseconds, not {value!r}")
    return value
