"""The object store benchmark (``python -m eqdelete bench --lakehouse``) at its quick sizes, on
the tier's servers: the same rows under every strategy, the GETs of delete files counted from
s3proxy's log, and maintain with data compaction (which runs maintain's rounds too) leaving no
equality delete once Flink is done, on a table seeded with scattered rows the job's upserts delete
(CI time: the plain maintain stream's path runs in the live test; rewrite_data_files, Iceberg's
own action, is the full benchmark's reference)."""

from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path

from pyspark.sql import SparkSession

from eqdelete.tools import lakehouse_bench
from eqdelete.tools.lakehouse import Lakehouse


def test_quick_benchmark_on_the_store(spark: SparkSession, lakehouse: Lakehouse, lake: str, tmp_path: Path) -> None:
    assert lake == "lake"  # the benchmark's tables are in the catalog named lake
    sizes = replace(lakehouse_bench.Sizes.quick(), seed_rows=20_000, seed_rows_per_file=5_000)
    assert sizes.stream_keys < sizes.seed_rows  # the job upserts seeded keys
    results = lakehouse_bench.run(spark, lakehouse, tmp_path, sizes=sizes, runs=1, progress=lambda _m: None,
                                  streams_of=("maintain+compaction",))

    reads = results["reads"]
    assert reads["identical"], "every strategy and the floor return the same rows"
    assert reads["equality_delete_files"] >= 2 and reads["data_files"] >= 2
    uncached = reads["delete_file_gets"]["uncached"]
    # eqdelete reads each delete file that applies once; natively each task reads those its
    # data file needs, so never fewer.
    assert 0 < uncached["filter"] <= reads["equality_delete_files"]
    assert uncached["native"] >= uncached["filter"]
    assert reads["limit"] == reads["medians"]["floor_keys"] + reads["medians"]["deletes_read"]

    streams = {s["how"]: s for s in results["streams"]}
    assert set(streams) == {"maintain+compaction"}
    for how, stream in streams.items():
        # Flink's commits (not the seed's or the keeper's): one at a checkpoint at least, so the
        # rounds ran while it wrote, and the one when its input ended. How many checkpoints
        # complete in the job's seconds is the machine's to say: a busy one completed one in 8 s.
        assert stream["commits"] >= 2, how
        assert stream["ticks"][0]["table_rows"] >= sizes.seed_rows, how
        last = stream["ticks"][-1]
        # The last round runs once Flink has finished: nothing is left for it to miss.
        assert last["lag_seconds"] == 0.0 and stream["files_after"].get("equality deletes", 0) == 0, (how, stream)
        # Every seeded key once, the upserted ones with the job's last row for them.
        table = lakehouse_bench._stream_table(how)
        live = sizes.seed_rows - lakehouse_bench.seed_deletes(sizes.seed_rows)
        counts = spark.sql(f"SELECT count(*), count(DISTINCT k), count_if(seq >= 0) FROM {table}").first()
        assert tuple(counts) == (live, live, sizes.stream_keys), how
        assert stream["before_job"]["committed"], how
    maintained = streams["maintain+compaction"]["ticks"]
    assert streams["maintain+compaction"]["before_job"]["rows_resolved"] == lakehouse_bench.seed_deletes(sizes.seed_rows)
    assert any(t["rows_resolved"] > 0 for t in maintained)
    # Compacting within its budget, maintain rewrote data files whose deletes emptied enough of them.
    assert sum(t["data_files_compacted"] for t in streams["maintain+compaction"]["ticks"]) > 0
    assert set(results["reads_after"]) == {"after maintain+compaction"}
    for name in ("lakehouse.json", "lakehouse.md", "lakehouse.png"):
        assert (tmp_path / name).stat().st_size > 0
    assert "| x limit |" in (tmp_path / "lakehouse.md").read_text()


def test_changes_lag_beside_flink_and_maintain(spark: SparkSession, lakehouse: Lakehouse, lake: str,
                                               tmp_path: Path) -> None:
    """The lag benchmark's run (``--changes-lag-ms``) with maintain on, at a small size: the stream
    delivers every Flink snapshot, its inserts less its deletes are the table's rows (run_one
    raises otherwise), and each snapshot's lag is measured from its commit."""
    from eqdelete.tools import changes_lag

    lag = changes_lag.run_one(spark, lakehouse, 1000, True, rows_per_second=1000, keys=2_000, seconds=10, cadence=3.0,
                              workdir=tmp_path, say=lambda _m: None)
    assert lag.commits >= 2 and lag.rounds >= 1, lag
    assert len(lag.lags) >= 2 and all(x > 0 for x in lag.lags), lag
    # Net: the table's 2,000 keys. (A key written twice in one checkpoint gets a position delete in
    # the same commit: its first row is never live, so fewer than 10,000 inserts may reach the stream.)
    assert lag.rows["INSERT"] - lag.rows.get("DELETE", 0) == 2_000, lag
    table = changes_lag.markdown([asdict(lag)], 3.0)
    assert "| 1 s | on | count | 10 |" in table, table


def test_changes_lag_into_a_copy(spark: SparkSession, lakehouse: Lakehouse, lake: str, tmp_path: Path) -> None:
    """The pipeline's lag (``--changes-lag-ms ... --apply``): each micro-batch applied to a copy by
    apply_changes, once. run_one raises unless the copy ends holding the table's rows (whole, with
    their counts) and every Flink snapshot was delivered by a batch the offsets log names; each
    snapshot's lag runs from its commit to the apply that brought it into the copy."""
    from eqdelete.tools import changes_lag

    lag = changes_lag.run_one(spark, lakehouse, 1000, False, rows_per_second=1000, keys=2_000, seconds=10, cadence=3.0,
                              workdir=tmp_path, say=lambda _m: None, apply=True)
    assert lag.applied and lag.commits >= 2 and lag.batches >= 1, lag
    assert len(lag.lags) >= 2 and all(x > 0 for x in lag.lags), lag
    # The copy's rows inserted less those deleted: the table's 2,000 keys.
    assert lag.rows["INSERT"] - lag.rows["DELETE"] == 2_000, lag
    table = changes_lag.markdown([asdict(lag)], 3.0)
    assert "| 1 s | off | apply_changes | 10 |" in table, table
