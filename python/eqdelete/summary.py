"""What a table holds: snapshots, data files, delete files by kind, and a native read."""

from __future__ import annotations

import time
from dataclasses import dataclass

from pyspark.sql import SparkSession

from eqdelete import _remote
from eqdelete.toggles import use_strategy

_CONTENTS = ("data", "position deletes", "equality deletes")


@dataclass(frozen=True)
class FileGroup:
    kind: str
    files: int
    records: int
    bytes: int


@dataclass(frozen=True)
class TableSummary:
    table: str
    snapshots: int
    groups: list[FileGroup]
    equality_column_sets: list[str]
    native_rows: int
    native_seconds: float

    def render(self) -> str:
        lines = [
            f"table {self.table}: {self.snapshots} snapshot(s)",
            f"  {'files':<18}{'count':>8}{'records':>14}{'bytes':>14}",
        ]
        for g in self.groups:
            lines.append(f"  {g.kind:<18}{g.files:>8,}{g.records:>14,}{g.bytes:>14,}")
        if self.equality_column_sets:
            lines.append(f"  equality columns: {'; '.join(self.equality_column_sets)}")
        lines.append(f"  native merge-on-read read: {self.native_rows:,} rows in {self.native_seconds:.2f}s")
        return "\n".join(lines)


def summarize(spark: SparkSession, table: str) -> TableSummary:
    """Summarise ``table``: its live files (``SELECT * FROM eqdelete_table_files('<table>')``),
    snapshots and one native count."""
    files = _remote.function_rows(spark, f"SELECT * FROM eqdelete_table_files({_remote.literal(table)})")
    groups = [
        FileGroup(
            kind,
            sum(r["files"] for r in files if r["content"] == kind),
            sum(r["records"] for r in files if r["content"] == kind),
            sum(r["bytes"] for r in files if r["content"] == kind),
        )
        for kind in _CONTENTS
    ]
    column_sets = sorted(r["equality_columns"] for r in files if r["equality_columns"] is not None)
    snapshots = spark.table(f"{table}.snapshots").count()
    with use_strategy(spark, "native"):
        started = time.monotonic()
        native_rows = spark.table(table).count()
        seconds = time.monotonic() - started
    return TableSummary(table, snapshots, groups, column_sets, native_rows, seconds)

