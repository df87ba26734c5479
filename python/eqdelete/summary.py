"""What a table holds: snapshots, data files, delete files by kind, and a native read."""

from __future__ import annotations

import time
from dataclasses import dataclass

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from eqdelete import _jvm
from eqdelete.toggles import use_strategy

_CONTENT = {0: "data", 1: "position deletes", 2: "equality deletes"}


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
    """Summarise ``table`` from Iceberg's metadata tables and one native count."""
    files = spark.table(f"{table}.files")
    grouped = {
        r["content"]: r
        for r in files.groupBy("content")
        .agg(F.count("*").alias("n"), F.sum("record_count").alias("records"), F.sum("file_size_in_bytes").alias("bytes"))
        .collect()
    }
    groups = [
        FileGroup(kind, grouped[c]["n"], grouped[c]["records"], grouped[c]["bytes"])
        if c in grouped
        else FileGroup(kind, 0, 0, 0)
        for c, kind in _CONTENT.items()
    ]
    fields = dict(_jvm.field_names(spark, table))
    id_sets = [
        r["equality_ids"]
        for r in files.where("content = 2").select("equality_ids").distinct().collect()
    ]
    column_sets = sorted(", ".join(fields.get(i, f"#{i}") for i in ids) for ids in id_sets)
    snapshots = spark.table(f"{table}.snapshots").count()
    with use_strategy(spark, "native"):
        started = time.monotonic()
        native_rows = spark.table(table).count()
        seconds = time.monotonic() - started
    return TableSummary(table, snapshots, groups, column_sets, native_rows, seconds)

