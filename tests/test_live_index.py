"""The live-row index (eqdelete.liveindex) finds exactly the positions today's resolve finds.

A resolve finds the rows its equality deletes remove by joining the delete rows with the key
columns of the data files they can touch (eqdelete.resolve.DeletedPositions). The index finds
them by looking each delete key up among the live rows' keys (IndexedDeletedPositions), and
keeps Iceberg's rules itself: NULL keys, scopes, global deletes, sequence numbers, rows
deleted by position already. Both ways run on every fixture, on the resolve tests' history
(checked against its model's count too), and on random histories of mixed key types, format
v2 and v3, partition spec changes and a key column rename (test_differential's). Then rounds
through indexes kept across them (KeptLiveIndex), each round's positions against today's plan
on the same snapshot, with others' writes, Iceberg's compactions, snapshot expiry, a rollback
and a lost index between rounds, and rounds that read the data files instead, dropping it. Last, rounds of a long-running maintain through the kept index, with a
store lost between them.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from fixtures import FIXTURES, MOR, sorted_rows
from pyspark.sql import SparkSession
from test_differential import History as RandomHistory
from test_key_types import PROMOTIONS
from test_resolve import build

from eqdelete import MaintainRound, _jvm, maintain_round, use_conf, use_strategy, write_equality_deletes

RANDOM_HISTORIES = range(2000, 2003)


def _check(spark: SparkSession, table: str) -> list[str]:
    today, indexed = _jvm.positions_both_ways(spark, table)
    assert indexed == today, (f"{table}: only today's plan found {sorted(set(today) - set(indexed))[:5]}; "
                              f"only the index found {sorted(set(indexed) - set(today))[:5]}")
    return today


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_the_index_finds_todays_positions_on_every_fixture(spark: SparkSession, table_name: str, name: str) -> None:
    FIXTURES[name](spark, table_name)
    _check(spark, table_name)


@pytest.mark.parametrize("version", [2, 3])
def test_the_index_finds_the_rows_the_model_says(spark: SparkSession, table_name: str, version: int) -> None:
    history = build(spark, table_name, version)
    assert len(_check(spark, table_name)) == history.model.resolvable()


@pytest.mark.parametrize("seed", RANDOM_HISTORIES)
def test_the_index_finds_todays_positions_on_random_histories(spark: SparkSession, table_name: str, seed: int) -> None:
    history = RandomHistory(spark, table_name, seed)
    history.run(steps=history.rng.randint(4, 6))
    _check(spark, table_name)


KEPT_HISTORIES = range(3000, 3003)


@pytest.mark.parametrize("seed", KEPT_HISTORIES)
def test_a_kept_index_finds_todays_positions_round_after_round(spark: SparkSession, table_name: str, seed: int) -> None:
    """Rounds of resolve through indexes kept across them, each brought forward from the snapshots
    between: others' inserts, upserts, equality and position deletes, a spec change, a key
    rename, Iceberg's compactions of data and of position deletes, snapshot expiry, a rollback of
    the last round, and a lost index (a restart), in a random order between rounds."""
    history = RandomHistory(spark, table_name, seed)
    rng = history.rng
    name = table_name.split(".", 1)[1]
    history.insert()

    def rewrite_data() -> None:
        spark.sql(f"CALL local.system.rewrite_data_files(table => '{name}', options => map('rewrite-all', 'true'))")

    def rewrite_position_deletes() -> None:
        spark.sql(f"CALL local.system.rewrite_position_delete_files(table => '{name}', options => map('rewrite-all', 'true'))")

    def expire() -> None:
        # A literal: Spark 3.5's CALL takes no expressions. Every snapshot but the current one goes.
        spark.sql(f"CALL local.system.expire_snapshots(table => '{name}', older_than => TIMESTAMP '2999-01-01 00:00:00', "
                  "retain_last => 1)")

    rounds = []
    last_start: list[int] = []
    choices = random.Random(seed)  # apart from the history's own, which shapes its writes

    def roll_back() -> None:
        # Back to before the last round: its commit (which the index took) leaves the lineage.
        if last_start:
            spark.sql(f"CALL local.system.rollback_to_snapshot(table => '{name}', snapshot_id => {last_start[-1]})")

    try:
        for _ in range(rng.randint(5, 7)):
            writes = [history.insert, history.upsert, history.upsert, history.equality_delete, history.equality_delete,
                      history.position_delete] + ([history.evolve_spec] if history.evolve_later else []) + (
                      [] if history.renamed else [history.rename_key])
            for change in rng.sample(writes, 2):
                change()
            for change, chance in ((roll_back, 0.15), (rewrite_data, 0.25), (rewrite_position_deletes, 0.25), (expire, 0.2),
                                   (lambda: _jvm.forget_kept_indexes(spark, table_name), 0.15)):
                if rng.random() < chance:
                    change()
            before = sorted_rows(spark.table(table_name).collect())
            last_start[:] = [_jvm.current_snapshot_id(spark, table_name)]
            # Some rounds read the data files instead, dropping the index (auto's choice for a round
            # large against the table); the next round builds it again.
            reading = choices.random() < 0.3
            today, indexed, resolved = _jvm.kept_index_round(spark, table_name, reading)
            assert indexed == today, (f"seed {seed} round {len(rounds)} ({'reading' if reading else 'through the index'}): "
                                      "only today's plan found "
                                      f"{sorted(set(today) - set(indexed))[:5]}; only the index {sorted(set(indexed) - set(today))[:5]}")
            assert resolved == len(today)
            assert sorted_rows(spark.table(table_name).collect()) == before
            rounds.append(len(today))
    finally:
        _jvm.forget_kept_indexes(spark, table_name)
    assert sum(rounds) > 0, rounds


def test_maintain_rounds_keep_the_index_and_load_it_where_a_store_is_lost(spark: SparkSession, table_name: str) -> None:
    """Rounds of a long-running maintain find the rows through the table's kept index: the first
    builds it from the table, the next read only the data files written since; a store lost with its
    executor is loaded from its checkpoint by the task that needs it (the round reads only what is
    new), and so is the whole index after a restart (forgotten by the driver: restored from its last
    saved version); after a compaction the entries of the files it replaced are purged, so the index
    holds the live rows exactly. Rows against those written."""
    spark.sql(f"CREATE TABLE {table_name} (k BIGINT, v STRING, p INT) USING iceberg PARTITIONED BY (p) "
              f"TBLPROPERTIES ({MOR.format(v=2)})")
    written = {k: f"a{k}" for k in range(60)}
    for half in (range(0, 30), range(30, 60)):
        spark.createDataFrame([(k, written[k], k % 3) for k in half], "k BIGINT, v STRING, p INT").writeTo(table_name).append()
    files = lambda: {r[0] for r in spark.sql(f"SELECT file_path FROM {table_name}.data_files").collect()}  # noqa: E731

    def upsert(keys: range) -> set[str]:
        before = files()
        old = [(k, written[k], k % 3) for k in keys]
        written.update({k: f"{written[k]}+" for k in keys})
        write_equality_deletes(spark, table_name, ["k"], old, inserts=[(k, written[k], k % 3) for k in keys],
                               columns=["k", "v", "p"])
        return files() - before

    def round_of(keys: range) -> tuple[MaintainRound, set[str]]:
        new = upsert(keys)
        r = maintain_round(spark, table_name, keep_index=True)
        assert r.committed and r.rows_resolved == len(keys), r.render()
        with use_strategy(spark, "native"):
            assert sorted_rows(spark.table(table_name).collect()) == sorted((k, v, k % 3) for k, v in written.items())
        return r, new

    with use_conf(spark, [("spark.eqdelete.maintain.liveIndex", "always")]):  # auto keeps none for a table this small
        try:
            first, _ = round_of(range(0, 10))
            assert "built from the table" in (first.live_index_note or "") and first.data_files_read == len(files())
            second, new = round_of(range(10, 15))
            assert second.live_index_note is None and second.data_files_read == len(new) < len(files()), (second, new)
            assert second.live_index_entries == 60 and second.live_index_bytes > 0
            loads = _jvm.kept_store_loads(spark)
            _jvm.lose_kept_index_stores(spark, table_name)
            lost, new = round_of(range(15, 20))
            assert lost.live_index_note is None and lost.data_files_read == len(new), lost
            assert _jvm.kept_store_loads(spark) > loads
            _jvm.forget_kept_indexes(spark, table_name)  # as a restart loses it
            restarted, new = round_of(range(20, 25))
            assert "restored from version" in (restarted.live_index_note or "") and restarted.data_files_read == len(new), restarted
            assert restarted.live_index_entries == 60, restarted
            spark.sql(f"CALL local.system.rewrite_data_files(table => '{table_name.split('.', 1)[1]}', "
                      "options => map('rewrite-all', 'true'))")
            compacted, _ = round_of(range(25, 30))
            # The replaced files' entries were purged: the index holds the live rows, each once.
            assert compacted.live_index_note is None and compacted.live_index_entries == 60, compacted
            # Auto reads this small table's files instead (the index's lookups cost more) and drops the
            # index; the next round through it builds it again.
            with use_conf(spark, [("spark.eqdelete.maintain.liveIndex", "auto")]):
                read, _ = round_of(range(30, 35))
            assert "the index was dropped" in (read.live_index_note or "") and read.live_index_entries == 0, read
            after, _ = round_of(range(35, 40))
            assert "built from the table" in (after.live_index_note or "") and after.live_index_entries == 60, after
        finally:
            _jvm.forget_kept_indexes(spark, table_name)


def _damage(state: Path, damage: str) -> str:
    """Damages the kept state under `state` as a disk's or an object store's bad write would: what
    the round's note then says of the version that held the damage."""
    if damage == "a sorted file overwritten in place":
        largest = max(state.rglob("*.sst"), key=lambda f: f.stat().st_size)
        size = largest.stat().st_size
        with open(largest, "r+b") as f:
            f.seek(size // 4)
            f.write(random.Random(5).randbytes(size // 2))
        assert largest.stat().st_size == size
        return "could not be loaded"
    newest = max(state.rglob("*.delta"), key=lambda f: int(f.name.split("-")[0]))
    size = newest.stat().st_size
    if damage == "the newest delta cut short":
        with open(newest, "r+b") as f:
            f.truncate(size // 2)
        return f"holds {size // 2} bytes, not {size}"
    if damage == "the newest delta overwritten in place":
        with open(newest, "r+b") as f:
            f.write(random.Random(6).randbytes(size))
        return "could not be loaded"
    newest.unlink()
    return "is missing"


@pytest.mark.parametrize("damage", ["a sorted file overwritten in place", "the newest delta cut short",
                                    "the newest delta overwritten in place", "the newest delta deleted"])
def test_damaged_kept_state_is_never_trusted(spark: SparkSession, table_name: str, damage: str) -> None:
    """The kept index's saved state damaged while no round runs: the restarted round restores the
    newest saved version whose files load and verify (their sizes, checksums, RocksDB's block
    checksums), never one it cannot read, and its note names the versions it passed over and why.
    A damaged sorted file is shared by every version: the index is built anew. A damaged newest
    delta is its version's alone: the version saved before it is restored and brought forward. Rows
    against those written, round after round."""
    spark.sql(f"CREATE TABLE {table_name} (k BIGINT, v STRING) USING iceberg TBLPROPERTIES ({MOR.format(v=2)})")
    written = {k: f"a{k}" for k in range(6000)}
    spark.createDataFrame(list(written.items()), "k BIGINT, v STRING").coalesce(1).writeTo(table_name).append()
    location = spark.sql(f"DESCRIBE TABLE EXTENDED {table_name}").where("col_name = 'Location'").first()[1]

    def upsert_and_round(keys: range) -> MaintainRound:
        old = [(k, written[k]) for k in keys]
        written.update({k: f"{written[k]}+" for k in keys})
        write_equality_deletes(spark, table_name, ["k"], old, inserts=[(k, written[k]) for k in keys], columns=["k", "v"])
        r = maintain_round(spark, table_name, keep_index=True)
        assert r.committed and r.rows_resolved == len(keys), r.render()
        with use_strategy(spark, "native"):
            assert sorted_rows(spark.table(table_name).collect()) == sorted(written.items())
        return r

    with use_conf(spark, [("spark.eqdelete.maintain.liveIndex", "always")]):
        try:
            built = upsert_and_round(range(0, 6000, 20))
            assert "built from the table" in (built.live_index_note or "")
            upsert_and_round(range(3, 6000, 20))  # a version of deltas after the build's snapshot
            _jvm.forget_kept_indexes(spark, table_name)  # as a restart: the next round restores a saved version
            said = _damage(Path(location.removeprefix("file:")) / "_eqdelete_state", damage)
            note = upsert_and_round(range(1, 6000, 20)).live_index_note or ""
            passed = re.search(r"saved versions passed over: version (\d+) of [^:]+: (.*)", note)
            assert passed and said in passed.group(2), note
            if damage == "a sorted file overwritten in place":
                assert note.startswith("built from the table"), note
            else:
                restored = re.match(r"restored from version (\d+) ", note)
                assert restored and int(restored.group(1)) < int(passed.group(1)), note  # the version saved before it
            upsert_and_round(range(2, 6000, 20))
        finally:
            _jvm.forget_kept_indexes(spark, table_name)


@pytest.mark.parametrize("reading", [False, True], ids=["through the index", "reading the data files"])
def test_a_commit_resolving_two_equality_sets_leaves_neither_index_a_row_the_other_deleted(
        spark: SparkSession, table_name: str, reading: bool) -> None:
    """One round resolves deletes by key and by value together: each set's index removes the rows
    it found, and reads again the files where the other set's rows went, so a later delete by key
    of a row the value delete took finds nothing, as today's plan finds nothing. A round that
    reads the data files instead drops both indexes, and the next builds them again."""
    spark.sql(f"CREATE TABLE {table_name} (k BIGINT, v STRING) USING iceberg TBLPROPERTIES ({MOR.format(v=2)})")
    spark.createDataFrame([(k, f"a{k}") for k in range(1, 7)], "k BIGINT, v STRING").writeTo(table_name).append()
    write_equality_deletes(spark, table_name, ["k"], [(1, "a1")], columns=["k", "v"])
    write_equality_deletes(spark, table_name, ["v"], [(2, "a2")], columns=["k", "v"])
    try:
        today, indexed, resolved = _jvm.kept_index_round(spark, table_name)
        assert indexed == today and resolved == 2
        write_equality_deletes(spark, table_name, ["k"], [(2, "a2"), (3, "a3")], columns=["k", "v"])
        today, indexed, resolved = _jvm.kept_index_round(spark, table_name, reading)
        assert indexed == today and resolved == 1, (today, indexed)  # row 2 went with the value delete
        # Row 3 went by key: the value index no longer holds it either.
        write_equality_deletes(spark, table_name, ["v"], [(3, "a3"), (5, "a5")], columns=["k", "v"])
        today, indexed, resolved = _jvm.kept_index_round(spark, table_name)
        assert indexed == today and resolved == 1, (today, indexed)
        with use_strategy(spark, "native"):
            assert sorted_rows(spark.table(table_name).collect()) == [(4, "a4"), (6, "a6")]
    finally:
        _jvm.forget_kept_indexes(spark, table_name)


@pytest.mark.parametrize("promotion", list(PROMOTIONS))
def test_a_kept_index_is_built_again_when_its_key_is_promoted(spark: SparkSession, table_name: str, promotion: str) -> None:
    """A promoted key column packs its values otherwise (a float's bits are not its double's): the
    index kept from before the promotion would find no new delete key, so it is built again."""
    before, after, value, _ = PROMOTIONS[promotion]
    spark.sql(f"CREATE TABLE {table_name} (k {before}, v STRING) USING iceberg TBLPROPERTIES ({MOR.format(v=2)})")
    spark.createDataFrame([(value(i), f"v{i}") for i in range(20)], spark.table(table_name).schema).writeTo(table_name).append()
    try:
        for step, key in enumerate((3, 5)):
            if step == 1:
                spark.sql(f"ALTER TABLE {table_name} ALTER COLUMN k TYPE {after}")
            write_equality_deletes(spark, table_name, ["k"], [(value(key),)])
            today, indexed, resolved = _jvm.kept_index_round(spark, table_name)
            assert indexed == today and resolved == 1, (promotion, step, today, indexed)
        with use_strategy(spark, "native"):
            assert sorted(r.k for r in spark.table(table_name).collect()) == sorted(value(i) for i in range(20) if i not in (3, 5))
    finally:
        _jvm.forget_kept_indexes(spark, table_name)
