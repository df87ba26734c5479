"""Tables with real equality deletes, and the rows Iceberg must return for them.

Each builder creates its table through Spark SQL and Iceberg's Java API (via
``eqdelete.write_equality_deletes``) and returns the expected live rows, written out by hand
from the semantics of Iceberg's table spec: sequence numbers, partition scoping, NULL = NULL, several
equality column sets, position deletes beside equality deletes, partition evolution.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal
from typing import Callable

from pyspark.sql import SparkSession

from eqdelete import write_equality_deletes

MOR = (
    "'format-version'='{v}', 'write.delete.mode'='merge-on-read', "
    "'write.update.mode'='merge-on-read', 'write.merge.mode'='merge-on-read'"
)


@dataclass(frozen=True)
class Fixture:
    table: str
    key_columns: tuple[str, ...]
    expected: list[tuple]
    # a column the rows can be filtered / aggregated on in later tests
    value_column: str = "v"


def _create(spark: SparkSession, table: str, columns: str, partitioned_by: str = "", version: int = 2) -> None:
    part = f" PARTITIONED BY ({partitioned_by})" if partitioned_by else ""
    spark.sql(f"CREATE TABLE {table} ({columns}) USING iceberg{part} TBLPROPERTIES ({MOR.format(v=version)})")


def _insert(spark: SparkSession, table: str, rows: list[tuple]) -> None:
    spark.createDataFrame(rows, spark.table(table).schema).writeTo(table).append()


def single_key(spark: SparkSession, table: str) -> Fixture:
    _create(spark, table, "k BIGINT, v STRING")
    _insert(spark, table, [(i, f"a{i}") for i in range(10)])
    write_equality_deletes(spark, table, ["k"], [(1,), (3,), (5,), (42,)])
    return Fixture(table, ("k",), [(i, f"a{i}") for i in range(10) if i not in (1, 3, 5)])


def multi_key(spark: SparkSession, table: str) -> Fixture:
    _create(spark, table, "k1 INT, k2 STRING, k3 DATE, v STRING")
    d1, d2 = dt.date(2024, 1, 1), dt.date(2024, 1, 2)
    rows = [(i, s, d, f"{i}{s}{d.day}") for i in (1, 2) for s in ("x", "y") for d in (d1, d2)]
    _insert(spark, table, rows)
    # Each delete row must match on all three columns: (1,'x',d1) goes, (1,'x',d2) stays.
    gone = [(1, "x", d1), (2, "y", d2), (9, "x", d1)]
    write_equality_deletes(spark, table, ["k1", "k2", "k3"], gone)
    return Fixture(table, ("k1", "k2", "k3"), [r for r in rows if r[:3] not in gone])


def null_keys(spark: SparkSession, table: str) -> Fixture:
    _create(spark, table, "k1 INT, k2 STRING, v STRING")
    rows = [(1, "a", "r1"), (None, "a", "r2"), (1, None, "r3"), (None, None, "r4"), (2, "b", "r5"), (None, "b", "r6")]
    _insert(spark, table, rows)
    # NULL matches NULL: (NULL,'a') deletes r2 only, (1,NULL) deletes r3 only, (NULL,NULL) r4.
    write_equality_deletes(spark, table, ["k1", "k2"], [(None, "a"), (1, None), (None, None)])
    return Fixture(table, ("k1", "k2"), [(1, "a", "r1"), (2, "b", "r5"), (None, "b", "r6")])


def partition_scoped(spark: SparkSession, table: str) -> Fixture:
    # The same key lives in two partitions; the partition column is not part of the key.
    _create(spark, table, "k BIGINT, region STRING, v STRING", "region")
    _insert(spark, table, [(1, "eu", "eu1"), (1, "us", "us1"), (2, "eu", "eu2"), (2, "us", "us2")])
    write_equality_deletes(spark, table, ["k"], [(1, "eu"), (2, "us")], columns=["k", "region"])
    return Fixture(table, ("k",), [(1, "us", "us1"), (2, "eu", "eu2")])


def transform_partitions(spark: SparkSession, table: str) -> Fixture:
    # bucket and day transforms: each delete file lands in the partition of its rows.
    _create(spark, table, "k BIGINT, ts TIMESTAMP, v STRING", "bucket(4, k), days(ts)")
    t1, t2 = dt.datetime(2024, 3, 1, 10, 0), dt.datetime(2024, 3, 2, 11, 0)
    rows = [(k, t, f"{k}@{t.day}") for k in range(6) for t in (t1, t2)]
    _insert(spark, table, rows)
    gone = [(0, t1), (3, t2), (5, t1), (5, t2)]
    write_equality_deletes(spark, table, ["k"], gone, columns=["k", "ts"])
    return Fixture(table, ("k",), [r for r in rows if r[:2] not in gone])


def global_after_spec_change(spark: SparkSession, table: str) -> Fixture:
    # Unpartitioned, then partitioned by region: a delete under the old (unpartitioned) spec is
    # global and reaches data files of both specs; a scoped one reaches only its partition.
    _create(spark, table, "k BIGINT, region STRING, v STRING")
    _insert(spark, table, [(1, "eu", "old1"), (2, "us", "old2"), (3, "eu", "old3")])
    spark.sql(f"ALTER TABLE {table} ADD PARTITION FIELD region")
    _insert(spark, table, [(1, "us", "new1"), (2, "eu", "new2"), (4, "us", "new4")])
    write_equality_deletes(spark, table, ["k"], [(1,)], global_deletes=True)
    write_equality_deletes(spark, table, ["k"], [(2, "eu"), (4, "eu")], columns=["k", "region"])
    return Fixture(table, ("k",), [(2, "us", "old2"), (3, "eu", "old3"), (4, "us", "new4")])


def upserts_and_reinserts(spark: SparkSession, table: str) -> Fixture:
    _create(spark, table, "k BIGINT, v STRING")
    _insert(spark, table, [(1, "v1"), (2, "v1"), (3, "v1")])
    # An upsert: delete and re-insert in one commit; the new version survives its own delete.
    write_equality_deletes(spark, table, ["k"], [(1,)], inserts=[(1, "v2")])
    # A plain delete, then a later re-insert of the same key: newer data is not deleted.
    write_equality_deletes(spark, table, ["k"], [(2,)])
    _insert(spark, table, [(2, "v3")])
    # Upsert of an upserted key: only the latest version remains.
    write_equality_deletes(spark, table, ["k"], [(1,)], inserts=[(1, "v4")])
    return Fixture(table, ("k",), [(1, "v4"), (2, "v3"), (3, "v1")])


def mixed_position_and_equality(spark: SparkSession, table: str, version: int = 2) -> Fixture:
    _create(spark, table, "k BIGINT, v STRING", version=version)
    _insert(spark, table, [(i, f"v{i}") for i in range(8)])
    spark.sql(f"DELETE FROM {table} WHERE k IN (0, 7)")  # merge-on-read: position deletes / DVs
    write_equality_deletes(spark, table, ["k"], [(3,), (7,)])
    spark.sql(f"DELETE FROM {table} WHERE k = 5")
    return Fixture(table, ("k",), [(i, f"v{i}") for i in (1, 2, 4, 6)])


def mixed_v3(spark: SparkSession, table: str) -> Fixture:
    return mixed_position_and_equality(spark, table, version=3)


def two_equality_sets(spark: SparkSession, table: str) -> Fixture:
    _create(spark, table, "id BIGINT, name STRING, day DATE, v DECIMAL(10,2)")
    d = dt.date(2024, 5, 1)
    rows = [(i, f"n{i % 3}", d + dt.timedelta(days=i % 2), Decimal(f"{i}.50")) for i in range(9)]
    _insert(spark, table, rows)
    write_equality_deletes(spark, table, ["id"], [(0,), (4,)])
    write_equality_deletes(spark, table, ["name", "day"], [("n1", d + dt.timedelta(days=1))])
    survivors = [r for r in rows if r[0] not in (0, 4) and not (r[1] == "n1" and r[2] == d + dt.timedelta(days=1))]
    return Fixture(table, ("id",), survivors)


FIXTURES: dict[str, Callable[[SparkSession, str], Fixture]] = {
    f.__name__: f
    for f in (
        single_key,
        multi_key,
        null_keys,
        partition_scoped,
        transform_partitions,
        global_after_spec_change,
        upserts_and_reinserts,
        mixed_position_and_equality,
        mixed_v3,
        two_equality_sets,
    )
}


def _sort_key(row: tuple) -> tuple:
    # NULLs first, and never compared with values.
    return tuple((v is not None, v) for v in row)


def sorted_rows(rows) -> list[tuple]:
    """Rows (Spark Rows or tuples) as sorted tuples, so multisets compare with ==."""
    return sorted((tuple(r) for r in rows), key=_sort_key)
