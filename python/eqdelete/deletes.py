"""Writing equality delete files through Iceberg's Java API, from Python."""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any, Sequence

from pyspark.sql import DataFrame, SparkSession

from eqdelete import _jvm, _remote
from eqdelete.config import PROCEDURE_CATALOG


@dataclass(frozen=True)
class Commit:
    """What one RowDelta added to a table."""

    snapshot_id: int
    data_files: int
    delete_files: int


def _frame(spark: SparkSession, rows: DataFrame | Sequence[Any] | None, like: str, columns: Sequence[str]) -> DataFrame | None:
    """A DataFrame from rows given as a DataFrame, or as tuples in ``columns`` order, typed like the table."""
    if rows is None or isinstance(rows, DataFrame):
        return rows
    table_schema = spark.table(like).schema
    fields = {f.name: f for f in table_schema.fields}
    unknown = [c for c in columns if c not in fields]
    if unknown:
        raise ValueError(f"{like} has no column(s) {', '.join(unknown)}")
    from pyspark.sql.types import StructType

    return spark.createDataFrame(list(rows), StructType([fields[c] for c in columns]))


def write_equality_deletes(
    spark: SparkSession,
    table: str,
    key_columns: Sequence[str],
    deletes: DataFrame | Sequence[Any] | None,
    *,
    inserts: DataFrame | Sequence[Any] | None = None,
    columns: Sequence[str] | None = None,
    global_deletes: bool = False,
    files_per_partition: int | None = 1,
) -> Commit:
    """Commit equality deletes on ``key_columns`` (and optional ``inserts``) in one snapshot.

    ``deletes`` holds the key values of the deleted rows, plus the partition source columns
    of a partitioned table (deletes are scoped to the partition of each row) unless
    ``global_deletes``, which writes them under the table's unpartitioned spec so they apply
    to every partition. Rows are a DataFrame, or tuples in the order of ``columns``
    (default: ``key_columns``). ``inserts`` are whole table rows added in the same commit,
    so they survive the deletes, as an upsert does. ``files_per_partition`` delete files are
    written per table partition (None keeps the DataFrame's own partitioning).
    """
    key_columns = list(key_columns)
    if not key_columns:
        raise ValueError("key_columns must name at least one column")
    if files_per_partition is not None and files_per_partition < 1:
        raise ValueError(f"files_per_partition must be at least 1, not {files_per_partition}")
    delete_frame = _frame(spark, deletes, table, list(columns or key_columns))
    insert_frame = _frame(spark, inserts, table, spark.table(table).columns) if inserts is not None else None
    if delete_frame is not None and files_per_partition is not None:
        delete_frame = delete_frame.repartition(files_per_partition)
    if _remote.is_remote(spark):
        return _commit_remote(spark, table, key_columns, delete_frame, insert_frame, global_deletes)
    snapshot, data_files, delete_files = _jvm.commit_equality_deletes(
        spark, table, key_columns, delete_frame, insert_frame, global_deletes
    )
    return Commit(snapshot, data_files, delete_files)


def _commit_remote(
    spark: SparkSession,
    table: str,
    key_columns: list[str],
    deletes: DataFrame | None,
    inserts: DataFrame | None,
    global_deletes: bool,
) -> Commit:
    """The same commit on a Spark Connect server: the rows as temporary views, read by
    ``CALL eqdelete.system.write_equality_deletes``."""
    with ExitStack() as views:
        queries = {
            name: f"SELECT * FROM `{views.enter_context(_remote.temp_view(frame))}`"
            for name, frame in (("deletes", deletes), ("inserts", inserts)) if frame is not None
        }
        row = _remote.call(spark, f"{PROCEDURE_CATALOG}.system.write_equality_deletes", table=table,
                           key_columns=key_columns, global_deletes=global_deletes, **queries)
    return Commit(row["snapshot_id"], row["data_files"], row["delete_files"])
