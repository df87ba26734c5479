"""Resolve equality deletes once: every live row they remove becomes a position delete (format
v2) or a bit of its data file's deletion vector (v3), and the equality delete files so resolved
are removed, in one commit. Every reader (Trino, Flink, pyiceberg, Spark without eqdelete,
Iceberg's own compaction) then reads the table without applying equality deletes.

The work runs on the JVM (``eqdelete.resolve`` in the extension): rows are found by a
distributed semi join and written by Spark tasks, never gathered on the driver.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Optional

from pyspark.sql import SparkSession

from eqdelete import _jvm, _remote
from eqdelete.config import PROCEDURE_CATALOG
from eqdelete.errors import CommitOutcomeUnknownError, ResolveConflictError, ResolveFailedError

__all__ = ["CommitOutcomeUnknownError", "ResolveConflictError", "ResolveFailedError", "ResolveResult",
           "resolve_equality_deletes"]


@dataclass(frozen=True)
class ResolveResult:
    """What ``resolve_equality_deletes`` did (with ``dry_run``: would do).

    ``snapshot_id`` is the snapshot committed, None when nothing was (a dry run, or nothing
    left to resolve). ``equality_delete_files_kept`` counts live equality delete files the
    ``where`` filter leaves in place (global ones, or those of partitions it selects only in
    part). ``data_files_read`` counts the data files whose key columns were read to find the rows:
    those Iceberg's planning pairs with an equality delete (partition, sequence numbers, key bounds of
    data and delete files). ``delete_files_replaced`` counts the deletion vectors (and file-scoped position
    delete files) merged into the new deletion vectors and removed. ``commit_note`` says what the
    client saw of a commit that landed although its answer was lost (None when the answer came).
    """

    table: str
    starting_snapshot_id: int
    snapshot_id: Optional[int]
    format_version: int
    equality_delete_files_removed: int
    equality_delete_files_kept: int
    data_files_read: int
    rows_resolved: int
    position_delete_files_written: int
    deletion_vectors_written: int
    delete_files_replaced: int
    dry_run: bool
    seconds: float
    commit_note: Optional[str] = None

    @property
    def committed(self) -> bool:
        return self.snapshot_id is not None

    def render(self) -> str:
        if self.dry_run:
            head = f"dry run on {self.table} (snapshot {self.starting_snapshot_id}): nothing written"
        elif self.committed:
            head = f"resolved {self.table}: snapshot {self.starting_snapshot_id} -> {self.snapshot_id}"
            if self.commit_note:
                head += f"; {self.commit_note}: committed, nothing to do"
        else:
            head = f"nothing to resolve in {self.table} (snapshot {self.starting_snapshot_id}): nothing committed"
        written = (f"{self.deletion_vectors_written:,} deletion vector(s)" if self.format_version >= 3
                   else f"{self.position_delete_files_written:,} position delete file(s)")
        lines = [
            head,
            f"  equality delete files removed: {self.equality_delete_files_removed:,}"
            + (f" ({self.equality_delete_files_kept:,} left: outside the filter)" if self.equality_delete_files_kept else ""),
            f"  data files read:               {self.data_files_read:,}",
            f"  rows resolved:                 {self.rows_resolved:,}",
            f"  written (format v{self.format_version}):          {written}"
            + (f", replacing {self.delete_files_replaced:,} delete file(s)" if self.delete_files_replaced else ""),
            f"  seconds:                       {self.seconds:.1f}",
        ]
        return "\n".join(lines)


def _resolve_remote(spark: SparkSession, table: str, where: Optional[str], dry_run: bool) -> dict:
    """The run on a Spark Connect server: ``CALL eqdelete.system.resolve_equality_deletes``."""
    return _remote.call(spark, f"{PROCEDURE_CATALOG}.system.resolve_equality_deletes", table=table, where=where,
                        dry_run=dry_run)


def resolve_equality_deletes(
    spark: SparkSession, table: str, *, where: Optional[str] = None, dry_run: bool = False
) -> ResolveResult:
    """Turn the equality deletes of ``table`` (its current snapshot) into position deletes or
    deletion vectors, and remove the equality delete files resolved, in one commit.

    ``where`` (SQL on the table's columns, e.g. ``"region = 3"``) limits the run to the
    partitions it selects wholly: only equality delete files of those partitions are resolved
    and removed; global ones (written under an unpartitioned spec) need the whole table. It must
    be a filter Iceberg can evaluate, or the call fails naming it. ``dry_run`` counts what would
    be resolved and writes nothing.

    Running it again when nothing is left commits nothing. A concurrent commit that rewrites or
    deletes the data files involved raises ``ResolveConflictError`` and leaves the table as it
    was; concurrent appends and new equality deletes do not conflict. A delete file that cannot
    be read fails the run before anything is written. Needs the eqdelete extension in the
    session (``eqdelete.session()`` or ``eqdelete.configure()``).
    """
    if not isinstance(table, str) or not table.strip():
        raise ValueError(f"table must name an Iceberg table, not {table!r}")
    if where is not None and (not isinstance(where, str) or not where.strip()):
        raise ValueError(f"where must be a SQL filter or None, not {where!r}")
    if _remote.is_remote(spark):
        raw = _resolve_remote(spark, table, where, bool(dry_run))
    else:
        raw = _jvm.resolve_equality_deletes(spark, table, where, bool(dry_run))
    return ResolveResult(**{f.name: raw[f.name] for f in fields(ResolveResult)})
