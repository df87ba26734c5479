"""The live-row index (eqdelete.liveindex) finds exactly the positions today's resolve finds.

A resolve finds the rows its equality deletes remove by joining the delete rows with the key
columns of the data files they can touch (eqdelete.resolve.DeletedPositions). The index finds
them by looking each delete key up among the live rows' keys (IndexedDeletedPositions), and
keeps Iceberg's rules itself: NULL keys, scopes, global deletes, sequence numbers, rows
deleted by position already. Both ways run on every fixture, on the resolve tests' history
(checked against its model's count too), and on random histories of mixed key types, format
v2 and v3, partition spec changes and a key column rename (test_differential's). Then rounds
through indexes kept across them (KeptLiveIndex), each round's positions against today's plan
on the same snapshot, with others' writes, Iceberg's compactions, snapshot expiry and a lost
index between rounds.
"""

from __future__ import annotations

import pytest
from fixtures import FIXTURES, sorted_rows
from pyspark.sql import SparkSession
from test_differential import History as RandomHistory
from test_resolve import build

from eqdelete import _jvm

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
    rename, Iceberg's compactions of data and of position deletes, snapshot expiry, and a lost
    index (a restart), in a random order between rounds."""
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
    try:
        for _ in range(rng.randint(5, 7)):
            writes = [history.insert, history.upsert, history.upsert, history.equality_delete, history.equality_delete,
                      history.position_delete] + ([history.evolve_spec] if history.evolve_later else []) + (
                      [] if history.renamed else [history.rename_key])
            for change in rng.sample(writes, 2):
                change()
            for change, chance in ((rewrite_data, 0.25), (rewrite_position_deletes, 0.25), (expire, 0.2),
                                   (lambda: _jvm.forget_kept_indexes(spark, table_name), 0.15)):
                if rng.random() < chance:
                    change()
            before = sorted_rows(spark.table(table_name).collect())
            today, indexed, resolved = _jvm.kept_index_round(spark, table_name)
            assert indexed == today, (f"seed {seed} round {len(rounds)}: only today's plan found "
                                      f"{sorted(set(today) - set(indexed))[:5]}; only the index {sorted(set(indexed) - set(today))[:5]}")
            assert resolved == len(today)
            assert sorted_rows(spark.table(table_name).collect()) == before
            rounds.append(len(today))
    finally:
        _jvm.forget_kept_indexes(spark, table_name)
    assert sum(rounds) > 0, rounds
