"""The changes of a table whose schema evolves, against an oracle of their own: each snapshot's rows,
read by time travel with Iceberg's reader in the schema that snapshot was written in, projected
into the schema of the range's end by field id at every depth (columns, struct fields, list
elements, map values), as the table's metadata JSON gives the schemas. That projection is written
here, apart from the plan's (ByFieldId). Random histories mix every schema change Iceberg allows
(add, drop, rename, reorder, promote; top-level and nested, key and other columns; a column added
and dropped again) with upserts, updates and deletes from eqdelete's writer and Spark's. Each is
checked whole, snapshot by snapshot and over ranges; a stream stops at a schema change with one
line and, restarted, goes on exactly once.
"""

from __future__ import annotations

import json
import os
import random
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
from fixtures import MOR
from pyspark.sql import Row, SparkSession
from pyspark.sql import types as T
from test_changes import lineage

import eqdelete
from eqdelete import use_strategy, write_equality_deletes
from eqdelete.changes import CHANGE_COLUMNS

HISTORIES = int(os.environ.get("EQDELETE_EVOLUTION_HISTORIES", "2"))


# -- the oracle: rows projected by field id, from the table's metadata ---------------------------


def metadata(spark: SparkSession, table: str) -> dict:
    """The table's current metadata JSON (a local file in the tests' warehouse)."""
    path = spark.sql(f"SELECT file FROM {table}.metadata_log_entries ORDER BY timestamp DESC LIMIT 1").first()[0]
    with open(urlparse(path).path if path.startswith("file:") else path) as f:
        return json.load(f)


def project(value: Any, read: Any, target: Any) -> Any:
    """``value``, read in Iceberg type ``read`` (metadata JSON), in type ``target``: struct fields by id (where
    ``read`` has none, the field's initial default, or None), list elements and map entries each projected; maps as sorted entries, so rows
    hash. A promoted primitive keeps its value (Python's int and float are the wider types already)."""
    if value is None:
        return None
    if isinstance(target, dict) and target["type"] == "struct":
        by_id = {f["id"]: f for f in read["fields"]}
        return tuple(project(value[by_id[f["id"]]["name"]], by_id[f["id"]]["type"], f["type"]) if f["id"] in by_id
                     else f.get("initial-default") for f in target["fields"])
    if isinstance(target, dict) and target["type"] == "list":
        return tuple(project(e, read["element"], target["element"]) for e in value)
    if isinstance(target, dict) and target["type"] == "map":
        return tuple(sorted(((project(k, read["key"], target["key"]), project(v, read["value"], target["value"]))
                             for k, v in value.items()), key=repr))
    return value


class Schemas:
    """The table's schemas and which one each snapshot was written in."""

    def __init__(self, spark: SparkSession, table: str) -> None:
        meta = metadata(spark, table)
        self.by_id = {s["schema-id"]: s for s in meta["schemas"]}
        self.current = meta["current-schema-id"]
        self.of_snapshot = {s["snapshot-id"]: s.get("schema-id", self.current) for s in meta["snapshots"]}

    def at(self, snapshot: int) -> dict:
        return self.by_id[self.of_snapshot[snapshot]]


def rows_in(spark: SparkSession, table: str, snapshot: int, schemas: Schemas, target: dict) -> Counter:
    """The rows live at ``snapshot`` (Iceberg's reader), in schema ``target``."""
    with use_strategy(spark, "native"):
        rows = spark.sql(f"SELECT * FROM {table} VERSION AS OF {snapshot}").collect()
    return Counter(project(r, schemas.at(snapshot), target) for r in rows)


def changes_in(rows: list[Row], target: dict) -> dict[int, tuple[Counter, Counter]]:
    """Commit snapshot id -> (inserted, deleted) rows, each in schema ``target`` (the changes' own)."""
    out: dict[int, tuple[Counter, Counter]] = {}
    for r in rows:
        inserted, deleted = out.setdefault(r["_commit_snapshot_id"], (Counter(), Counter()))
        data = Row(**{f["name"]: r[f["name"]] for f in target["fields"]})
        (inserted if r["_change_type"] == "INSERT" else deleted)[project(data, target, target)] += 1
    return out


def same_schema_as_read(spark: SparkSession, table: str, snapshot: int, changes) -> None:
    """The changes' columns are exactly those a read of ``snapshot`` (the range's end) shows: names,
    types and nullability at every depth."""
    def shape(t: T.DataType) -> Any:  # names, types and nullability; not the fields' metadata (comments, defaults)
        if isinstance(t, T.StructType):
            return [(f.name, shape(f.dataType), f.nullable) for f in t.fields]
        if isinstance(t, T.ArrayType):
            return ("array", shape(t.elementType), t.containsNull)
        if isinstance(t, T.MapType):
            return ("map", shape(t.keyType), shape(t.valueType), t.valueContainsNull)
        return t.simpleString()
    read = shape(spark.sql(f"SELECT * FROM {table} VERSION AS OF {snapshot}").schema)
    mine = shape(T.StructType(changes.schema.fields[: -len(CHANGE_COLUMNS)]))
    assert mine == read, f"the changes' columns {mine} != the read's {read}"


def check_range(spark: SparkSession, table: str, chain: list[int], first: int, last: int) -> int:
    """The changes of snapshots ``chain[first..last]`` against the oracle, in the schema of ``chain[last]``:
    the rows changed."""
    schemas = Schemas(spark, table)
    target = schemas.at(chain[last])
    start = chain[first - 1] if first > 0 else None
    changes = eqdelete.changes(spark, table, start_snapshot_id=start, end_snapshot_id=chain[last])
    assert changes.columns[: -len(CHANGE_COLUMNS)] == [f["name"] for f in target["fields"]]
    same_schema_as_read(spark, table, chain[last], changes)
    got = changes_in(changes.collect(), target)
    before = rows_in(spark, table, chain[first - 1], schemas, target) if first > 0 else Counter()
    changed = 0
    for snapshot in chain[first:last + 1]:
        after = rows_in(spark, table, snapshot, schemas, target)
        inserted, deleted = got.get(snapshot, (Counter(), Counter()))
        assert inserted == after - before, f"snapshot {snapshot}: inserts"
        assert deleted == before - after, f"snapshot {snapshot}: deletes"
        changed += sum(inserted.values()) + sum(deleted.values())
        before = after
    assert set(got) <= set(chain[first:last + 1])
    return changed


# -- random histories ------------------------------------------------------------------------------

COLUMNS = ("k INT, n INT, f FLOAT, d DECIMAL(9,2), s STRUCT<a: INT, b: STRING>, l ARRAY<INT>, "
           "m MAP<STRING, STRUCT<x: INT>>, v STRING")

# Every schema change Iceberg allows, at every depth; {k} is the key column's name then. A change
# needs those before it in its tuple (a column dropped after it was added; a rename of the key
# before its promotion reads the new name).
SCHEMA_CHANGES: list[tuple[str, ...]] = [
    ("ALTER TABLE {t} ADD COLUMN s.c INT",),
    ("ALTER TABLE {t} ALTER COLUMN s.b FIRST",),
    ("ALTER TABLE {t} RENAME COLUMN s.a TO a2",),
    ("ALTER TABLE {t} ALTER COLUMN n TYPE BIGINT", "ALTER TABLE {t} DROP COLUMN n"),
    ("ALTER TABLE {t} ALTER COLUMN f TYPE DOUBLE",),
    ("ALTER TABLE {t} ALTER COLUMN d TYPE DECIMAL(18,2)",),
    ("ALTER TABLE {t} ALTER COLUMN l.element TYPE BIGINT",),
    ("ALTER TABLE {t} ADD COLUMN m.value.y STRING",),
    ("ALTER TABLE {t} ADD COLUMN w STRING", "ALTER TABLE {t} DROP COLUMN w"),
    ("ALTER TABLE {t} ALTER COLUMN v AFTER {k}",),
    ("ALTER TABLE {t} RENAME COLUMN {k} TO key",),
    ("ALTER TABLE {t} ALTER COLUMN {k} TYPE BIGINT",),
    ("ALTER TABLE {t} DROP COLUMN s.b",),
]


class EvolvingHistory:
    """A table (v2 or v3, merge-on-read) whose schema changes between upserts (eqdelete's writer) and Spark's
    UPDATE, MERGE and DELETE."""

    def __init__(self, spark: SparkSession, table: str, seed: int) -> None:
        self.spark, self.table, self.rng = spark, table, random.Random(seed)
        self.version = self.rng.choice([2, 3])
        self.key = "k"
        self.step = 0
        self.pending = [list(c) for c in self.rng.sample(SCHEMA_CHANGES, len(SCHEMA_CHANGES))]
        spark.sql(f"CREATE TABLE {table} ({COLUMNS}) USING iceberg TBLPROPERTIES ({MOR.format(v=self.version)})")

    def _value(self, data_type: T.DataType, nullable: bool = True) -> Any:
        rng = self.rng
        if nullable and rng.random() < 0.1:
            return None
        if isinstance(data_type, T.StructType):
            return tuple(self._value(f.dataType) for f in data_type.fields)
        if isinstance(data_type, T.ArrayType):
            return [self._value(data_type.elementType) for _ in range(rng.randint(0, 2))]
        if isinstance(data_type, T.MapType):
            return {f"e{i}": self._value(data_type.valueType) for i in range(rng.randint(0, 2))}
        if isinstance(data_type, T.IntegerType):
            return rng.randint(-3, 3)
        if isinstance(data_type, T.LongType):
            return rng.choice([rng.randint(-3, 3), 3_000_000_000 + rng.randint(0, 3)])
        if isinstance(data_type, (T.FloatType, T.DoubleType)):
            return rng.choice([0.5, -1.25, 3.0])
        if isinstance(data_type, T.DecimalType):
            return Decimal(f"{rng.randint(-999, 999)}.{rng.randint(0, 99):02d}")
        self.step += 1
        return f"s{self.step}"

    @property
    def schema(self) -> T.StructType:
        return self.spark.table(self.table).schema

    def _key_value(self) -> Any:
        return None if self.rng.random() < 0.1 else self.rng.randint(0, 5)

    def _rows(self, keys: list[Any]) -> list[tuple]:
        schema = self.schema
        return [tuple(key if f.name == self.key else self._value(f.dataType) for f in schema.fields) for key in keys]

    def insert(self) -> None:
        rows = self._rows([self._key_value() for _ in range(self.rng.randint(2, 4))])
        self.spark.createDataFrame(rows, self.schema).writeTo(self.table).append()

    def upsert(self) -> None:
        keys = list({self._key_value() for _ in range(self.rng.randint(1, 3))})
        inserts = self.spark.createDataFrame(self._rows(keys), self.schema)
        write_equality_deletes(self.spark, self.table, [self.key], [(k,) for k in keys], inserts=inserts)

    def update(self) -> None:
        self.step += 1
        self.spark.sql(f"UPDATE {self.table} SET v = 'u{self.step}' WHERE {self.key} = {self.rng.randint(0, 5)}")

    def merge(self) -> None:
        self.step += 1
        self.spark.sql(f"MERGE INTO {self.table} t USING (SELECT {self.rng.randint(0, 5)} AS mk) s ON t.{self.key} = s.mk "
                       f"WHEN MATCHED THEN UPDATE SET v = 'm{self.step}'")

    def delete(self) -> None:
        key = self._key_value()
        self.spark.sql(f"DELETE FROM {self.table} WHERE {self.key} " + ("IS NULL" if key is None else f"= {key}"))

    def evolve(self) -> str:
        """Applies the next schema change (the first statement of one, or the rest of one begun)."""
        change = self.pending[0]
        statement = change.pop(0).format(t=self.table, k=self.key)
        if not change:
            self.pending.pop(0)
        self.spark.sql(statement)
        if "RENAME COLUMN k TO key" in statement.replace(self.table, ""):
            self.key = "key"
        return statement

    def run(self, steps: int) -> list[str]:
        self.insert()
        done = []
        for _ in range(steps):
            if self.pending and self.rng.random() < 0.45:
                done.append(self.evolve())
            else:
                self.rng.choice([self.insert, self.upsert, self.upsert, self.update, self.merge, self.delete])()
        return done


@pytest.mark.parametrize("seed", range(7000, 7000 + HISTORIES))
def test_changes_in_the_end_schema_over_every_schema_change(spark: SparkSession, table_name: str, seed: int) -> None:
    history = EvolvingHistory(spark, table_name, seed)
    statements = history.run(steps=history.rng.randint(12, 16))
    chain = lineage(spark, table_name)
    strategy = ("filter", "join", "auto")[seed % 3]
    try:
        with use_strategy(spark, strategy):
            assert check_range(spark, table_name, chain, 0, len(chain) - 1) > 0
            # Ranges ending before later schema changes: in the schema of their own end.
            for _ in range(2):
                first = history.rng.randrange(len(chain))
                check_range(spark, table_name, chain, first, history.rng.randrange(first, len(chain)))
    except AssertionError as error:
        raise AssertionError(f"seed {seed} ({strategy}), v{history.version}, schema changes {statements}: {error}") from None


def test_a_running_stream_through_random_schema_changes_replays_the_table(spark: SparkSession, table_name: str,
                                                                         tmp_path: Path) -> None:
    # The stream runs while the history is written: it stops at each snapshot whose schema changes its
    # columns and is restarted from its checkpoint. Every batch's rows, each in the schema its query
    # started with, projected by field id into the end's, replayed (DELETEs finding their rows) give
    # the table's rows at the end.
    history = EvolvingHistory(spark, table_name, 7100)
    history.insert()
    checkpoint, batches, stops = tmp_path / "checkpoint", [], []

    def start() -> Any:
        schemas = Schemas(spark, table_name)
        columns = schemas.by_id[schemas.current]  # the query's: the table's schema when it starts
        return (eqdelete.changes_stream(spark, table_name).writeStream
                .foreachBatch(lambda df, _: batches.append((columns, df.collect())))
                .option("checkpointLocation", str(checkpoint)).trigger(processingTime="100 milliseconds").start())

    query = start()
    try:
        for _ in range(14):
            if history.pending and history.rng.random() < 0.45:
                history.evolve()
            else:
                history.rng.choice([history.insert, history.upsert, history.update, history.merge, history.delete])()
            try:
                query.processAllAvailable()
            except Exception as failure:  # noqa: BLE001 - the stop is what is checked
                assert "changes the stream's columns" in str(failure), failure
                stops.append(str(failure))
                query = start()
                query.processAllAvailable()
    finally:
        query.stop()
    assert stops, "no schema change stopped the stream"
    schemas = Schemas(spark, table_name)
    end = schemas.by_id[schemas.current]
    state: Counter = Counter()
    for columns, rows in batches:
        for r in sorted(rows, key=lambda r: (r._change_ordinal, r._change_type != "DELETE")):
            row = project(Row(**{f["name"]: r[f["name"]] for f in columns["fields"]}), columns, end)
            if r._change_type == "DELETE":
                assert state[row] > 0, f"a DELETE of {row}, which is not there"
                state[row] -= 1
            else:
                state[row] += 1
    assert +state == rows_in(spark, table_name, lineage(spark, table_name)[-1], schemas, end)


# -- the cases, by hand --------------------------------------------------------------------


def _struct_table(spark: SparkSession, table: str) -> None:
    spark.sql(f"CREATE TABLE {table} (k BIGINT, s STRUCT<a: INT, b: INT>, v STRING) USING iceberg "
              f"TBLPROPERTIES ({MOR.format(v=2)})")
    spark.sql(f"INSERT INTO {table} VALUES (1, named_struct('a', 1, 'b', 2), 'x')")


def test_a_nested_field_added_or_moved_keeps_every_value_in_its_field(spark: SparkSession, table_name: str) -> None:
    _struct_table(spark, table_name)
    spark.sql(f"ALTER TABLE {table_name} ADD COLUMN s.c INT")
    spark.sql(f"ALTER TABLE {table_name} ALTER COLUMN s.b FIRST")
    spark.sql(f"UPDATE {table_name} SET v = 'y' WHERE k = 1")
    rows = eqdelete.changes(spark, table_name).orderBy("_change_ordinal", "_change_type").collect()
    assert [(r.s.asDict(), r.v, r._change_type) for r in rows] == [
        ({"b": 2, "a": 1, "c": None}, "x", "INSERT"),
        ({"b": 2, "a": 1, "c": None}, "x", "DELETE"),
        ({"b": 2, "a": 1, "c": None}, "y", "INSERT"),
    ]


def test_carry_over_rows_with_maps_are_dropped(spark: SparkSession, table_name: str) -> None:
    # A copy-on-write update rewrites the file: the row it did not change is deleted and inserted
    # identically, which the changes drop, comparing maps by their entries.
    spark.sql(f"CREATE TABLE {table_name} (k BIGINT, m MAP<STRING, STRUCT<x: DOUBLE>>, v STRING) USING iceberg "
              "TBLPROPERTIES ('format-version'='2', 'write.update.mode'='copy-on-write')")
    spark.sql(f"INSERT INTO {table_name} VALUES (1, map('a', named_struct('x', -0.0D), 'b', NULL), 'x'), "
              "(2, map('c', named_struct('x', 1.5D)), 'x')")
    spark.sql(f"UPDATE {table_name} SET v = 'y' WHERE k = 2")
    last = eqdelete.changes(spark, table_name).where("_change_ordinal = 1")
    assert sorted((r.k, r.v, r._change_type) for r in last.collect()) == [(2, "x", "DELETE"), (2, "y", "INSERT")]


def _running(spark: SparkSession, table: str, checkpoint: Path, out: list[Row]) -> Any:
    """The stream running (every 200 ms) into ``out``."""
    return (eqdelete.changes_stream(spark, table).writeStream.foreachBatch(lambda df, _: out.extend(df.collect()))
            .option("checkpointLocation", str(checkpoint)).trigger(processingTime="200 milliseconds").start())


def _stream(spark: SparkSession, table: str, checkpoint: Path, out: list[Row]) -> Exception | None:
    """One AvailableNow run of the stream into ``out``; the failure that ended it, if one did."""
    query = (eqdelete.changes_stream(spark, table).writeStream
             .foreachBatch(lambda df, _: out.extend(df.collect()))
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    try:
        query.awaitTermination()
        return None
    except Exception as failure:  # noqa: BLE001 - the query's failure is what is checked
        return failure


def test_a_stream_stops_at_a_promotion_and_goes_on_after_a_restart(spark: SparkSession, table_name: str,
                                                                  tmp_path: Path) -> None:
    spark.sql(f"CREATE TABLE {table_name} (k BIGINT, n INT, s STRUCT<a: INT>) USING iceberg "
              f"TBLPROPERTIES ({MOR.format(v=2)})")
    spark.sql(f"INSERT INTO {table_name} VALUES (1, 7, named_struct('a', 1))")
    checkpoint, out = tmp_path / "checkpoint", []
    query = _running(spark, table_name, checkpoint, out)
    try:
        query.processAllAvailable()
        spark.sql(f"INSERT INTO {table_name} VALUES (2, 8, named_struct('a', 2))")
        spark.sql(f"ALTER TABLE {table_name} ALTER COLUMN n TYPE BIGINT")
        spark.sql(f"ALTER TABLE {table_name} ADD COLUMN s.b STRING")
        spark.sql(f"INSERT INTO {table_name} VALUES (3, 3000000000, named_struct('a', 3, 'b', 'z'))")
        spark.sql(f"DELETE FROM {table_name} WHERE k = 1")
        # The running query reads the row written before the change, then stops naming the change.
        with pytest.raises(Exception, match=r"changes the stream's columns \(int n promoted to long; added field s\.b\)"):
            query.awaitTermination(120)
    finally:
        query.stop()
    assert [(r.k, r.n, r._change_type) for r in out] == [(1, 7, "INSERT"), (2, 8, "INSERT")]
    # Restarted, in the new schema: every change after it exactly once, never a wrapped number.
    again: list[Row] = []
    assert _stream(spark, table_name, checkpoint, again) is None
    assert sorted((r.k, r.n, r.s.asDict(), r._change_type) for r in again) == [
        (1, 7, {"a": 1, "b": None}, "DELETE"), (3, 3000000000, {"a": 3, "b": "z"}, "INSERT")]


def test_a_running_stream_carries_a_reorder(spark: SparkSession, table_name: str, tmp_path: Path) -> None:
    _struct_table(spark, table_name)
    out: list[Row] = []
    query = _running(spark, table_name, tmp_path / "checkpoint", out)
    try:
        query.processAllAvailable()
        spark.sql(f"ALTER TABLE {table_name} ALTER COLUMN s.b FIRST")
        spark.sql(f"ALTER TABLE {table_name} ALTER COLUMN v FIRST")
        spark.sql(f"INSERT INTO {table_name} (v, k, s) VALUES ('y', 2, named_struct('b', 4, 'a', 3))")
        query.processAllAvailable()
    finally:
        query.stop()
    assert [(r.k, r.s.asDict(), r.v) for r in out] == [(1, {"a": 1, "b": 2}, "x"), (2, {"a": 3, "b": 4}, "y")]


def test_the_changes_carry_the_end_schemas_nullability(spark: SparkSession, table_name: str) -> None:
    # Columns required when the rows were written and optional since (top level, in a struct, in a
    # struct that stays required), and on v3 a field added with an initial default: a snapshot that
    # only deletes is read in the end's schema, so its changes declare exactly those columns optional.
    spark.sql(f"CREATE TABLE {table_name} (k INT, r INT NOT NULL, st STRUCT<sa: INT NOT NULL, sb: STRING>, "
              f"rs STRUCT<x: INT NOT NULL> NOT NULL, v STRING) USING iceberg TBLPROPERTIES ({MOR.format(v=3)})")
    spark.sql(f"INSERT INTO {table_name} VALUES (1, 10, named_struct('sa', 1, 'sb', 'x'), named_struct('x', 1), 'a'), "
              "(2, 20, named_struct('sa', 2, 'sb', 'y'), named_struct('x', 2), 'b')")
    spark.sql(f"ALTER TABLE {table_name} ALTER COLUMN r DROP NOT NULL")
    spark.sql(f"ALTER TABLE {table_name} ALTER COLUMN st.sa DROP NOT NULL")
    spark.sql(f"ALTER TABLE {table_name} ALTER COLUMN rs.x DROP NOT NULL")
    jvm = spark.sparkContext._jvm
    table = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, table_name)
    types = jvm.org.apache.iceberg.types.Types
    table.updateSchema().addColumn("dflt", types.IntegerType.get(), "a default",
                                   jvm.org.apache.iceberg.expressions.Literal.of(7)).commit()
    write_equality_deletes(spark, table_name, ["k"], [(1,)])
    chain = lineage(spark, table_name)
    changes = eqdelete.changes(spark, table_name)
    same_schema_as_read(spark, table_name, chain[-1], changes)
    by_type = sorted((r._change_type, r.k, r.r, r.st.sa, r.dflt) for r in changes.collect())
    assert by_type == [("DELETE", 1, 10, 1, 7), ("INSERT", 1, 10, 1, 7), ("INSERT", 2, 20, 2, 7)], by_type
    assert check_range(spark, table_name, chain, 0, len(chain) - 1) > 0
