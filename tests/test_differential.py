"""Randomized differential tests: whole write histories, every strategy against native.

Each history (seeded, reproducible) creates a table with 1-3 key columns of mixed types,
then commits a random sequence of inserts, upserts, equality deletes (partition-scoped and
global, NULL keys, a second equality column set), position deletes, a partition spec change
and a key column rename. Every (snapshot, query) pair is a case, checked under filter and join
(broadcast, or for odd seeds shuffled) against Iceberg's native read. EQDELETE_DIFF_HISTORIES sets how many histories run
(EQDELETE_DIFF_SEED the first seed).
"""

from __future__ import annotations

import datetime as dt
import os
import random
from decimal import Decimal

import pytest
from fixtures import MOR
from oracle import check_against_native
from pyspark.sql import SparkSession

from eqdelete import _jvm, use_conf, write_equality_deletes

HISTORIES = int(os.environ.get("EQDELETE_DIFF_HISTORIES", "12"))
FIRST_SEED = int(os.environ.get("EQDELETE_DIFF_SEED", "1000"))
CASES = {"run": 0}

TYPES = {
    "int": ("INT", lambda n: n),
    "long": ("BIGINT", lambda n: n * 10_000_000_000),
    "string": ("STRING", lambda n: f"s{n}"),
    "date": ("DATE", lambda n: dt.date(2024, 1, 1) + dt.timedelta(days=n)),
    "decimal": ("DECIMAL(9,2)", lambda n: Decimal(f"{n}.25")),
    "timestamp": ("TIMESTAMP", lambda n: dt.datetime(2024, 1, 1, n, 30)),
}
SPECS = ["", "p", "bucket(3, k1)", "days(ts)"]


class History:
    def __init__(self, spark: SparkSession, table: str, seed: int) -> None:
        self.spark, self.table, self.rng = spark, table, random.Random(seed)
        rng = self.rng
        self.types = rng.sample(sorted(TYPES), rng.randint(1, 3))
        self.keys = [f"k{i + 1}" for i in range(len(self.types))]
        self.spec = rng.choice(SPECS)
        self.evolve_later = self.spec == "" and rng.random() < 0.6
        # Global deletes need an unpartitioned spec in the table's history.
        self.had_unpartitioned_spec = self.spec == ""
        self.version = rng.choice([2, 2, 3])
        self.renamed = False
        self.snapshots: list[int] = []
        self.rows: list[tuple] = []
        columns = ", ".join(f"{k} {TYPES[t][0]}" for k, t in zip(self.keys, self.types))
        part = f" PARTITIONED BY ({self.spec})" if self.spec else ""
        spark.sql(
            f"CREATE TABLE {table} ({columns}, p INT, ts TIMESTAMP, v STRING) USING iceberg{part} "
            f"TBLPROPERTIES ({MOR.format(v=self.version)})"
        )
        self.step = 0

    # -- values -------------------------------------------------------------------------

    def _key(self) -> tuple:
        return tuple(None if self.rng.random() < 0.15 else TYPES[t][1](self.rng.randint(0, 2)) for t in self.types)

    def _row(self, key: tuple | None = None, partition: tuple | None = None) -> tuple:
        p, ts = partition or (self.rng.randint(0, 2), dt.datetime(2024, 2, 1 + self.rng.randint(0, 2), 8))
        self.step += 1
        return (*(key or self._key()), p, ts, f"v{self.step}")

    def _existing(self) -> tuple:
        return self.rng.choice(self.rows) if self.rows and self.rng.random() < 0.8 else self._row()

    @property
    def columns(self) -> list[str]:
        return self.spark.table(self.table).columns

    def _key_names(self) -> list[str]:
        return self.columns[: len(self.keys)]

    # -- operations ---------------------------------------------------------------------

    def insert(self) -> None:
        new = [self._row() for _ in range(self.rng.randint(3, 8))]
        self.spark.createDataFrame(new, self.spark.table(self.table).schema).writeTo(self.table).append()
        self.rows += new

    def upsert(self) -> None:
        old = [self._existing() for _ in range(self.rng.randint(1, 3))]
        new = [self._row(key=r[: len(self.keys)], partition=r[len(self.keys) : len(self.keys) + 2]) for r in old]
        write_equality_deletes(self.spark, self.table, self._key_names(), old, inserts=new, columns=self.columns)
        self.rows += new

    def equality_delete(self) -> None:
        victims = [self._existing() for _ in range(self.rng.randint(1, 3))]
        if self.rng.random() < 0.25:
            # A second equality set: delete by value, or by (p, first key).
            names = ["v"] if self.rng.random() < 0.5 else ["p", self._key_names()[0]]
        else:
            names = self._key_names()
        # Under an unpartitioned spec every delete is global; after evolution, half of them are.
        global_deletes = self.had_unpartitioned_spec and self.spec != "" and self.rng.random() < 0.5
        write_equality_deletes(
            self.spark, self.table, names, victims, columns=self.columns, global_deletes=global_deletes
        )

    def position_delete(self) -> None:
        if self.rows:
            self.spark.sql(f"DELETE FROM {self.table} WHERE v = '{self.rng.choice(self.rows)[-1]}'")

    def evolve_spec(self) -> None:
        self.spark.sql(f"ALTER TABLE {self.table} ADD PARTITION FIELD p")
        self.spec, self.evolve_later = "p", False

    def rename_key(self) -> None:
        first = self._key_names()[0]
        self.spark.sql(f"ALTER TABLE {self.table} RENAME COLUMN {first} TO {first}_renamed")
        self.renamed = True

    def run(self, steps: int) -> None:
        self.insert()
        self.snapshots.append(self._current())
        for _ in range(steps):
            choices = [self.insert, self.upsert, self.upsert, self.equality_delete, self.equality_delete, self.position_delete]
            if self.evolve_later:
                choices.append(self.evolve_spec)
            if not self.renamed:
                choices.append(self.rename_key)
            self.rng.choice(choices)()
            self.snapshots.append(self._current())

    def _current(self) -> int:
        return _jvm.current_snapshot_id(self.spark, self.table)


@pytest.mark.parametrize("seed", range(FIRST_SEED, FIRST_SEED + HISTORIES))
def test_random_history(spark: SparkSession, table_name: str, seed: int) -> None:
    history = History(spark, table_name, seed)
    history.run(steps=history.rng.randint(4, 6))
    rng = history.rng
    # Every snapshot x three query shapes; each pair is a case. All cases of a history run as
    # one UNION ALL query (each scan rewritten on its own, rows tagged with their case so a
    # difference names it): one Spark job per strategy instead of one per case.
    snapshots = sorted(set(history.snapshots))
    cases = []
    for snapshot in snapshots:
        source = f"{table_name} VERSION AS OF {snapshot}"
        cases += [
            f"SELECT * FROM {source}",
            f"SELECT v, p FROM {source}",
            f"SELECT * FROM {source} WHERE p = {rng.randint(0, 2)}",
        ]
    sql = " UNION ALL ".join(
        f"SELECT {i} AS case_id, to_json(struct(*)) AS row FROM ({case})" for i, case in enumerate(cases)
    )
    # Odd seeds shuffle every join part (broadcast otherwise, at these sizes): shuffled parts
    # drop the delete rows a single-column set covers.
    shuffled = [("spark.eqdelete.join.broadcastMaxBytes", "1")] if seed % 2 else []
    try:
        with use_conf(spark, shuffled):
            check_against_native(spark, lambda: spark.sql(sql))
    except AssertionError as error:
        listing = "\n".join(f"  case {i}: {case}" for i, case in enumerate(cases))
        raise AssertionError(
            f"seed {seed}, key types {history.types}, spec {history.spec!r}, v{history.version}\n{listing}\n{error}"
        ) from None
    CASES["run"] += len(cases)
