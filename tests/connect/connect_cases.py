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
