"""Applying a table's changes to a copy, exactly and once: ``ApplyChanges`` on the JVM, served by
``CALL eqdelete.system.apply_changes`` (also over Spark Connect). Rows are matched whole and
counted, so NULL keys, keys live twice and updates come out as the source's rows; each commit is
marked on the copy (a stream's writer and batch id, or the source's snapshot), so a batch replayed
after a crash changes nothing. docs/changes.md gives the semantics."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from pyspark.sql import DataFrame, SparkSession

from eqdelete import _remote
from eqdelete.config import PROCEDURE_CATALOG

_PROCEDURE = f"{PROCEDURE_CATALOG}.system.apply_changes"


@dataclass(frozen=True)
class AppliedChanges:
    """What one application of changes did to the copy."""

    snapshot_id: Optional[int]  # the copy's snapshot it committed; None when it committed nothing
    rows_deleted: int
    rows_inserted: int
    skipped: Optional[str]  # why nothing was committed: applied already, up to date, or changes that cancel out


def apply_changes(changes: DataFrame, table: str, *, keys: Optional[Sequence[str]] = None,
                  writer_id: Optional[str] = None, batch_id: Optional[int] = None) -> AppliedChanges:
    """Apply ``changes`` (the rows of ``changes`` or a micro-batch of ``changes_stream``) to the
    Iceberg table ``table``, a copy of their table, in one commit: each INSERT or UPDATE_AFTER adds
    its row, each DELETE or UPDATE_BEFORE removes one copy of its row (by position). With
    ``writer_id`` (a name for the stream, the same across its restarts) and ``batch_id``
    (foreachBatch's), once: a batch the copy has marked already is skipped, so in ``foreachBatch``
    the copy ends exactly as the table whatever restarts::

        query = (eqdelete.changes_stream(spark, "lake.db.orders").writeStream
                 .foreachBatch(lambda df, batch_id: eqdelete.apply_changes(
                     df, "lake.db.orders_copy", keys=["id"], writer_id="orders-copy", batch_id=batch_id))
                 .option("checkpointLocation", "/checkpoints/orders-copy").start())

    ``keys`` only narrow the copy's read (Iceberg prunes data files by the keys' range, and by
    their values for up to 200 rows removed). A DELETE of a row the copy
    does not hold fails, naming it, and writes nothing."""
    if not isinstance(table, str) or not table.strip():
        raise ValueError(f"table must be a table name such as 'lake.db.orders_copy', not {table!r}")
    if (writer_id is None) != (batch_id is None):
        raise ValueError("give writer_id and batch_id together (a name for the stream and foreachBatch's batch id), "
                         "or neither")
    if batch_id is not None and (isinstance(batch_id, bool) or not isinstance(batch_id, int) or batch_id < 0):
        raise ValueError(f"batch_id must be foreachBatch's batch id, an int >= 0, not {batch_id!r}")
    with _remote.temp_view(changes) as view:
        row = _remote.call(changes.sparkSession, _PROCEDURE, table=table, changes=f"SELECT * FROM `{view}`",
                           keys=_keys(keys), writer_id=writer_id, batch_id=batch_id)
    return AppliedChanges(**row)


def apply_changes_from(spark: SparkSession, source: str, table: str, *,
                       keys: Optional[Sequence[str]] = None) -> AppliedChanges:
    """Bring ``table``, a copy of ``source``, up to ``source``'s current snapshot: the changes
    since the snapshot the copy was last brought to (marked on it; the first time, all of
    ``source``'s history, for an empty copy), applied as ``apply_changes`` does, in one commit
    marked with the snapshot reached (changes that cancel out too: a snapshot with no file, so the
    next call starts after them). ``CALL eqdelete.system.apply_changes(table => ..., source =>
    ...)`` in SQL."""
    for name, value in (("source", source), ("table", table)):
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"{name} must be a table name such as 'lake.db.orders', not {value!r}")
    return AppliedChanges(**_remote.call(spark, _PROCEDURE, table=table, source=source, keys=_keys(keys)))


def _keys(keys: Optional[Sequence[str]]) -> Optional[list[str]]:
    if keys is None:
        return None
    if isinstance(keys, str) or not all(isinstance(k, str) and k for k in keys):
        raise ValueError(f"keys must be a list of column names, not {keys!r}")
    return list(keys)
