"""The object store benchmark (``python -m eqdelete bench --lakehouse``) at its quick sizes, on
the tier's servers: the same rows under every strategy, the GETs of delete files counted from
s3proxy's log, and every way of keeping the table (maintain, maintain with data compaction,
rewrite_data_files) leaving no equality delete once Flink is done."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

from eqdelete.tools import lakehouse_bench
from eqdelete.tools.lakehouse import Lakehouse


def test_quick_benchmark_on_the_store(spark: SparkSession, lakehouse: Lakehouse, lake: str, tmp_path: Path) -> None:
    assert lake == "lake"  # the benchmark's tables are in the catalog named lake
    results = lakehouse_bench.run(spark, lakehouse, tmp_path, sizes=lakehouse_bench.Sizes.quick(), runs=1,
                                  progress=lambda _m: None)

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
    assert set(streams) == {"maintain", "maintain+compaction", "rewrite_data_files"}
    for how, stream in streams.items():
        assert stream["commits"] >= 3, how
        last = stream["ticks"][-1]
        # The last round runs once Flink has finished: nothing is left for it to miss.
        assert last["lag_seconds"] == 0.0 and stream["files_after"].get("equality deletes", 0) == 0, (how, stream)
    assert any(t["rows_resolved"] > 0 for t in streams["maintain"]["ticks"])
    assert streams["maintain"]["files_after"].get("position deletes", 0) > 0
    # Compacting within its budget, maintain rewrote data files whose deletes emptied enough of them.
    assert sum(t["data_files_compacted"] for t in streams["maintain+compaction"]["ticks"]) > 0
    assert set(results["reads_after"]) == {"after maintain", "after maintain+compaction", "after rewrite_data_files"}
    for name in ("lakehouse.json", "lakehouse.md", "lakehouse.png"):
        assert (tmp_path / name).stat().st_size > 0
    assert "| x limit |" in (tmp_path / "lakehouse.md").read_text()
