"""What the Connect tier and its classic twin both run."""

from __future__ import annotations

from eqdelete.tools.cdc import CdcSpec

STRATEGIES = ("native", "filter", "join", "auto")
QUERY = "SELECT * FROM {t} WHERE k1 % 3 <> 0"


def spec(table: str) -> CdcSpec:
    """A small CDC table: a base load and a few commits of deletes and upserts, partitioned so
    deletes are scoped."""
    return CdcSpec(table, rows=3000, data_files=2, commits=3, delete_fraction=0.02, upsert_fraction=0.02,
                   partitioning="identity")


def fingerprint_sql(table: str) -> str:
    """(rows, order-independent hash of every row) of the table, in SQL."""
    return f"SELECT count(*), sum(CAST(xxhash64(*) AS DECIMAL(38, 0))) FROM {table}"


def changes_fingerprint(changes) -> list[list[int | str]]:  # noqa: ANN001 - a classic or a Connect DataFrame
    """Per change type and snapshot: (type, ordinal, rows, order-independent hash of the rows)."""
    from pyspark.sql import functions as F

    rows = changes.groupBy("_change_type", "_change_ordinal").agg(
        F.count("*"), F.sum(F.xxhash64(*changes.columns).cast("decimal(38, 0)"))).collect()
    return sorted([r[0], int(r[1]), int(r[2]), int(r[3])] for r in rows)
