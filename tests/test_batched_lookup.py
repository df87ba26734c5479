"""The filter's lookups of hashed keys a columnar batch at a time (the LookUpDeletedKeys node),
checked against rows the test computes itself from what it wrote: UUID strings, Iceberg's
``uuid`` type, binary keys and a (long, string, date) key with NULL parts, over partition-scoped
deletes of several sequence numbers, rows re-inserted after their delete, position deletes
(Iceberg then hands out filtered batches holding more columns than the scan's), and files of
more rows than one lookup takes together (256). Where every delete key is a UUID in canonical form, or
every one a string of at most 15 bytes, the index holds them as two longs, which its metrics show."""

from __future__ import annotations

import datetime as dt
import random
import uuid
from collections import Counter
from typing import Any, Callable

import pytest
from fixtures import MOR
from plans import executed, physical_nodes
from pyspark.sql import DataFrame, SparkSession
from test_key_types import _create_with_iceberg_api, multiset
from test_scan_metrics import scan_metrics

import eqdelete
from eqdelete import write_equality_deletes

FILTER = [("spark.eqdelete.strategy", "filter")]
BATCHED = ("spark.eqdelete.filter.batchedLookup", "true")
TWO_LONG_KEYS = "keys held in two longs: UUIDs (1), strings of at most 15 bytes (2), or not (0)"
ONE_AT_A_TIME = ("spark.eqdelete.filter.batchedLookup", "false")


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128)))


# shape -> (key columns' DDL, or a function building the Iceberg type of `k`; a random key value tuple, NULL parts included)
SHAPES: dict[str, tuple[Any, Callable[[random.Random], tuple]]] = {
    "uuid string": ("k STRING", lambda r: (None,) if r.random() < 0.02 else (_uuid(r),)),
    "uuid type": (lambda t: t.UUIDType.get(), lambda r: (None,) if r.random() < 0.02 else (_uuid(r),)),
    # Every key a UUID: the index holds them as 128 bits (a NULL or any other string makes it hashed).
    "uuid string, no NULL": ("k STRING", lambda r: (_uuid(r),)),
    "uuid type, no NULL": (lambda t: t.UUIDType.get(), lambda r: (_uuid(r),)),
    # Every key at most 15 bytes (two-byte characters, a trailing NUL byte): two longs as well.
    "short string, no NULL": ("k STRING", lambda r: (f"k\u00e9-{r.randint(0, 400)}" + r.choice(["", "\x00"]),)),
    # Two forms in one set: the hashed index.
    "uuid and short strings": ("k STRING", lambda r: (_uuid(r) if r.random() < 0.5 else f"k-{r.randint(0, 400)}",)),
    "binary": ("k BINARY", lambda r: (None,) if r.random() < 0.02 else (r.randbytes(r.randint(0, 12)),)),
    "long, string, date": (
        "k1 BIGINT, k2 STRING, k3 DATE",
        lambda r: (
            None if r.random() < 0.05 else r.randint(0, 50) * 10_000_000_000,
            None if r.random() < 0.05 else f"name-{r.randint(0, 40)}",
            None if r.random() < 0.05 else dt.date(2024, 1, 1) + dt.timedelta(days=r.randint(0, 30)),
        ),
    ),
}


#: The index's form of the shapes whose keys it holds in two longs (the metric); the others are hashed (0).
TWO_LONGS = {"uuid string, no NULL": 1, "uuid type, no NULL": 1, "short string, no NULL": 2}


def _lookups(df: DataFrame) -> int:
    """LookUpDeletedKeys nodes in the plan `df` ran with."""
    return sum(1 for node in physical_nodes(executed(df)) if str(node.nodeName()) == "LookUpDeletedKeys")


def _create(spark: SparkSession, table: str, ddl: Any) -> list[str]:
    """The table (keys, p INT, v INT), partitioned by p; returns its key columns."""
    if isinstance(ddl, str):
        spark.sql(f"CREATE TABLE {table} ({ddl}, p INT, v INT) USING iceberg PARTITIONED BY (p) "
                  f"TBLPROPERTIES ({MOR.format(v=2)})")
        return [c.split()[0] for c in ddl.split(", ")]
    _create_with_iceberg_api(spark, table, ddl, with_partition_column=True)
    spark.sql(f"ALTER TABLE {table} ADD PARTITION FIELD p")
    return ["k"]


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_hashed_keys_looked_up_a_batch_at_a_time_delete_the_rows_icebergs_rules_define(
        spark: SparkSession, table_name: str, shape: str) -> None:
    ddl, key_of = SHAPES[shape]
    rng = random.Random(sorted(SHAPES).index(shape))
    keys = _create(spark, table_name, ddl)
    columns = spark.table(table_name).columns
    schema = spark.table(table_name).schema
    # The model: every live row with the sequence number of the commit that wrote it.
    live: list[tuple[tuple, int]] = []
    seq, v = 0, 0

    def insert(key_values: list[tuple]) -> None:
        nonlocal seq, v
        seq += 1
        rows = []
        for key in key_values:
            rows.append((*key, rng.randint(0, 2), v))
            v += 1
        # Two files a partition, each past one lookup's 256 keys.
        spark.createDataFrame(rows, schema).repartition(2, "p").writeTo(table_name).append()
        live.extend((row, seq) for row in rows)

    def delete(deleted: list[tuple]) -> None:
        """Equality deletes of (keys..., p): a row goes when its key and partition match and it is older."""
        nonlocal seq
        seq += 1
        write_equality_deletes(spark, table_name, keys, deleted, columns=[*keys, "p"])
        gone = Counter(deleted)
        live[:] = [(row, s) for row, s in live if not (gone[(*row[: len(keys)], row[len(keys)])] and s < seq)]

    insert([key_of(rng) for _ in range(3000)])
    existing = [row for row, _ in live]
    # Half of them in the row's own partition (deletes it), some in another (deletes nothing there), some unknown keys.
    first = [(*r[: len(keys)], r[len(keys)]) for r in rng.sample(existing, 600)]
    first += [(*r[: len(keys)], (r[len(keys)] + 1) % 3) for r in rng.sample(existing, 100)]
    first += [(*key_of(rng), rng.randint(0, 2)) for _ in range(100)]
    delete(first)
    # Some deleted keys come back, newer than their delete; then more deletes, then position deletes.
    insert([d[: len(keys)] for d in rng.sample(first, 200)] + [key_of(rng) for _ in range(800)])
    delete([(*r[: len(keys)], r[len(keys)]) for r, _ in rng.sample(live, 500)])
    spark.sql(f"DELETE FROM {table_name} WHERE v % 7 = 0")
    live[:] = [(row, s) for row, s in live if row[-1] % 7 != 0]
    expected = multiset([row for row, _ in live])

    query = f"SELECT {', '.join(columns)} FROM {table_name}"
    answers = {}
    for setting in (BATCHED, ONE_AT_A_TIME):
        with eqdelete.use_conf(spark, [*FILTER, setting]):
            df = spark.sql(query)
            answers[setting] = multiset(df.collect())
            (decision,) = eqdelete.decisions(df)
            assert decision.strategy == "filter", decision
            looked_up = _lookups(df)
            if setting == ONE_AT_A_TIME:
                assert looked_up == 0
            else:
                assert looked_up == 1, executed(df).toString()
    assert answers[BATCHED] == expected, f"{shape}: batched lookup differs from the model"
    assert answers[ONE_AT_A_TIME] == expected, f"{shape}: row-at-a-time lookup differs from the model"

    # A query's own row filter: its rows are looked up one at a time, only those it keeps.
    with eqdelete.use_conf(spark, [*FILTER, BATCHED]):
        index = scan_metrics(spark, query, "BuildDeleteKeyIndex")
        assert index[TWO_LONG_KEYS] == [TWO_LONGS.get(shape, 0)], index
        df = spark.sql(f"{query} WHERE v % 3 = 1")
        assert multiset(df.collect()) == multiset([row for row, _ in live if row[-1] % 3 == 1])
        assert _lookups(df) == 0


def test_the_batched_lookup_shows_its_time_and_each_removed_row_counts_once(spark: SparkSession, table_name: str) -> None:
    # Two equality sets: a string key (looked up a batch at a time) and an int (row by row, the
    # primitive index), both in one filter; 134 rows are deleted by both.
    spark.sql(f"CREATE TABLE {table_name} (k STRING, v INT) USING iceberg TBLPROPERTIES ({MOR.format(v=2)})")
    spark.createDataFrame([(f"key-{i}", i) for i in range(2000)], "k STRING, v INT").coalesce(1).writeTo(table_name).append()
    write_equality_deletes(spark, table_name, ["k"], [(f"key-{i}",) for i in range(0, 2000, 3)])
    write_equality_deletes(spark, table_name, ["v"], [(i,) for i in range(0, 2000, 5)])
    removed = 667 + 400 - 134
    query = f"SELECT count(*) FROM {table_name}"
    with eqdelete.use_conf(spark, [*FILTER, BATCHED]):
        assert spark.sql(query).first()[0] == 2000 - removed
        df = spark.sql(query)
        df.collect()
        assert _lookups(df) == 1
        lookup = scan_metrics(spark, query, "LookUpDeletedKeys")
        index = scan_metrics(spark, query, "BuildDeleteKeyIndex")
    assert len(lookup["time looking up delete keys"]) == 1, lookup  # 2,000 rows may take under the millisecond it shows
    assert sorted(index["data rows removed by the index"]) in ([266, 667], [400, 533]), index
    assert sum(index["data rows removed by the index"]) == removed, index


def test_a_long_key_keeps_its_row_at_a_time_predicate(spark: SparkSession, table_name: str) -> None:
    spark.sql(f"CREATE TABLE {table_name} (k BIGINT, v INT) USING iceberg TBLPROPERTIES ({MOR.format(v=2)})")
    spark.createDataFrame([(i, i) for i in range(500)], "k BIGINT, v INT").coalesce(1).writeTo(table_name).append()
    write_equality_deletes(spark, table_name, ["k"], [(i,) for i in range(0, 500, 5)])
    with eqdelete.use_conf(spark, [*FILTER, BATCHED]):
        df = spark.table(table_name)
        assert df.count() == 400
        assert _lookups(df) == 0
