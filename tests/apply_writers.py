"""Writers side by side into one copy, each applying its own source's changes (inserts only) under
its own writer id, batch after batch: run as threads of one session, in this process or another
(``test_apply_changes``, ``lakehouse/test_apply_writers``)."""

from __future__ import annotations

import threading
from collections import Counter

from pyspark.sql import SparkSession

import eqdelete


def create(spark: SparkSession, copy: str, sources: list[str]) -> None:
    for table in (copy, *sources):
        spark.sql(f"CREATE TABLE {table} (k BIGINT, v STRING) USING iceberg")


def write(spark: SparkSession, copy: str, sources: dict[int, str], batches: int) -> list[BaseException]:
    """Writer ``i`` (one thread each) inserts row ``100 * i + batch`` into ``sources[i]`` and applies
    the changes since its last batch to ``copy`` as batch ``batch`` of writer ``w<i>``; what failed."""
    failures: list[BaseException] = []

    def writer(i: int) -> None:
        try:
            before = None
            for batch in range(batches):
                spark.sql(f"INSERT INTO {sources[i]} VALUES ({expected_key(i, batch)}, 's{i}')")
                eqdelete.apply_changes(eqdelete.changes(spark, sources[i], start_snapshot_id=before), copy,
                                       writer_id=f"w{i}", batch_id=batch)
                before = eqdelete._jvm.current_snapshot_id(spark, sources[i])
        except BaseException as error:  # noqa: BLE001 - reported by the caller
            failures.append(error)

    threads = [threading.Thread(target=writer, args=(i,)) for i in sources]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    return failures


def expected_key(writer: int, batch: int) -> int:
    return 100 * writer + batch


def expected_rows(writers: int, batches: int) -> Counter:
    return Counter((expected_key(i, b), f"s{i}") for i in range(writers) for b in range(batches))


def marks(spark: SparkSession, copy: str) -> Counter:
    """How many of the copy's snapshots carry each (writer id, batch id) mark."""
    found: Counter = Counter()
    for (summary,) in spark.sql(f"SELECT summary FROM {copy}.snapshots").collect():
        found.update((key.removeprefix("eqdelete.applied."), int(value)) for key, value in summary.items()
                     if key.startswith("eqdelete.applied.w"))
    return found
