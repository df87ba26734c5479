"""The live-row index (eqdelete.liveindex) finds exactly the positions today's resolve finds.

A resolve finds the rows its equality deletes remove by joining the delete rows with the key
columns of the data files they can touch (eqdelete.resolve.DeletedPositions). The index finds
them by looking each delete key up among the live rows' keys (IndexedDeletedPositions), and
keeps Iceberg's rules itself: NULL keys, scopes, global deletes, sequence numbers, rows
deleted by position already. Both ways run on every fixture, on the resolve tests' history
(checked against its model's count too), and on random histories of mixed key types, format
v2 and v3, partition spec changes and a key column rename (test_differential's).
"""

from __future__ import annotations

import pytest
from fixtures import FIXTURES
from pyspark.sql import SparkSession
from test_differential import History as RandomHistory
from test_resolve import build

from eqdelete import _jvm

RANDOM_HISTORIES = range(2000, 2004)


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
