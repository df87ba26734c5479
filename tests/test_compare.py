"""The A/B compare runner and the benchmark's quick profile (rows checked, timings never)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from fixtures import FIXTURES, _create, _insert
from pyspark.sql import SparkSession

import eqdelete
from eqdelete.decisions import decisions
from eqdelete.tools import bench, sweep
from eqdelete.tools.report import load_results, run_merged


def test_compare_checks_rows_and_reports_each_strategy(spark: SparkSession, table_name: str, tmp_path: Path) -> None:
    FIXTURES["two_equality_sets"](spark, table_name)
    messages: list[str] = []
    comparison = eqdelete.compare(spark, f"SELECT * FROM {table_name}", runs=2, warmup=1, progress=messages.append)
    assert comparison.identical
    assert [r.strategy for r in comparison.runs] == list(eqdelete.STRATEGIES)
    assert {r.rows for r in comparison.runs} == {5}
    assert comparison.by_strategy("filter").plan == "filter" and comparison.by_strategy("join").plan == "join"
    assert comparison.by_strategy("native").plan == "native"
    assert comparison.by_strategy("join").delete_files == 2
    assert all(len(r.seconds) == 2 for r in comparison.runs)
    assert any("warm-up" in m for m in messages) and any("round 2/2" in m for m in messages)
    table = comparison.render()
    assert "identical across strategies" in table and "vs native" in table
    chart = comparison.save_chart(tmp_path / "cmp.png")
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_compare_refuses_a_table_without_equality_deletes(spark: SparkSession, table_name: str) -> None:
    _create(spark, table_name, "k BIGINT, v STRING")
    _insert(spark, table_name, [(1, "a")])
    with pytest.raises(eqdelete.NoEqualityDeletesError, match=f"no Iceberg table with equality deletes.*{table_name}"):
        eqdelete.compare(spark, f"SELECT * FROM {table_name}")


def test_compare_refuses_a_non_iceberg_query(spark: SparkSession) -> None:
    spark.range(10).createOrReplaceTempView("not_iceberg")
    with pytest.raises(eqdelete.NoEqualityDeletesError, match="Iceberg tables read: none"):
        eqdelete.compare(spark, "SELECT * FROM not_iceberg")


def test_compare_rejects_unknown_strategies(spark: SparkSession) -> None:
    with pytest.raises(ValueError, match="unknown strategy fastest"):
        eqdelete.compare(spark, "SELECT 1", ["native", "fastest"])


def test_bench_quick_profile_runs_every_scenario(spark: SparkSession, tmp_path: Path) -> None:
    scenarios = bench.quick_scenarios()
    results = bench.run(spark, scenarios, tmp_path, runs=1, warmup=0, progress=lambda _m: None)
    assert [r.name for r in results] == [s.name for s in scenarios]
    assert all(r.identical for r in results), [r.name for r in results if not r.identical]
    saved = json.loads((tmp_path / "results.json").read_text())
    assert {tuple(sorted(r["medians"])) for r in saved} == {tuple(sorted([*eqdelete.STRATEGIES, "floor", "floor_keys"]))}
    assert all(r["ratio_to_floor_keys"]["floor_keys"] == 1.0 for r in saved)
    assert (tmp_path / "results.md").read_text().startswith("| scenario")
    assert (tmp_path / "results.png").stat().st_size > 0


def test_reading_keys_adds_the_key_columns_to_the_query(spark: SparkSession) -> None:
    sql = bench.reading_keys(bench.QUERY.format(t="local.db.t"), ["k1", "k2"])
    assert sql.endswith(", count(k1) AS k1_read, count(k2) AS k2_read FROM local.db.t")
    assert sql.startswith(bench.QUERY.split(" FROM ")[0])


def test_planning_benchmark_reports_cold_and_warm_per_strategy(spark: SparkSession, tmp_path: Path) -> None:
    scenario = bench.streaming_upsert(0.002, commits=2)
    result = bench.planning(spark, scenario, runs=1, out=tmp_path, progress=lambda _m: None)
    assert set(result.cold) == set(result.warm) == {"native", "filter", "join", "auto"}
    assert all(v > 0 for v in [*result.cold.values(), *result.warm.values()])
    assert "| native | " in (tmp_path / "planning.md").read_text() and (tmp_path / "planning.json").is_file()


def test_sweep_quick_profile_checks_every_variant(spark: SparkSession, tmp_path: Path) -> None:
    points = sweep.default_points(quick=True)
    results = sweep.run(spark, points, tmp_path, base_rows=20_000, runs=1, warmup=0, progress=lambda _m: None)
    assert [(r.axis, r.value) for r in results] == [(p.axis, p.value) for p in points]
    assert all(r.identical for r in results)
    assert [r.delete_files for r in results] == [1, 3, 1, 1]
    assert [r.key_type for r in results] == ["long", "long", "long,string,date", "string"]
    assert all(set(r.medians) == {"native", "filter", "broadcast_join", "shuffled_join", "auto"} for r in results)
    assert (tmp_path / "sweep.md").read_text().startswith("| axis") and (tmp_path / "sweep.png").stat().st_size > 0


def test_resolve_bench_quick_profile_checks_rows(spark: SparkSession, tmp_path: Path) -> None:
    from eqdelete.tools import resolve_bench
    from eqdelete.tools.cli import resolve_bench_scenarios

    scenarios = resolve_bench_scenarios(quick=True, rows_factor=1.0)
    results = resolve_bench.run(spark, scenarios, tmp_path, runs=1, warmup=0, progress=lambda _m: None)
    assert [r.name for r in results] == ["cdc_upsert", "streaming_upsert", "streaming_upsert_v3"]
    assert all(r.equality_delete_files > 0 and r.rows_resolved > 0 for r in results)
    assert all(set(r.after) == {"resolved_native", "rewritten_native", "floor"} for r in results)
    assert (tmp_path / "resolve.md").read_text().startswith("| scenario")


def test_changes_bench_quick_profile_checks_rows(spark: SparkSession, tmp_path: Path) -> None:
    from eqdelete.tools import changes_bench

    # An earlier run's results for other keys (saved before results named their point) stay beside this run's.
    earlier = Path(__file__).resolve().parents[1] / "docs" / "benchmark" / "changes-keys.json"
    (tmp_path / "changes.json").write_text(earlier.read_text())
    # The changes are checked inside against the difference of two time-travel reads.
    results = changes_bench.run(spark, changes_bench.default_points(quick=True), tmp_path, runs=1, warmup=0,
                                progress=lambda _m: None)
    saved = [r.point for r in load_results(tmp_path, "changes", changes_bench.ChangesBenchResult)]
    assert saved == [r.point for r in load_results(earlier.parent, "changes-keys", changes_bench.ChangesBenchResult)] + [
        "long/10000"], saved
    assert [(r.rows, r.upserts) for r in results] == [(10**4, 100)]
    assert results[0].changed_rows > 100 and set(results[0].medians) == {
        "changes", "except_all", "parent_read", "row_images_build", "row_images", "row_images_plain", "row_images_restart",
        "row_image_checkpoint_bytes", "row_image_stored_bytes", "row_images_new_process"}
    # Each commit's changes checkpointed the images' new version; after a restart, in this application and in a new
    # one, they were restored and gave the same rows as without them (checked inside).
    assert results[0].medians["row_image_checkpoint_bytes"] > 0 and results[0].medians["row_image_stored_bytes"] > 0
    assert (tmp_path / "changes.md").read_text().startswith("| key | data rows")
    assert "\n| long | 10,000 |" in (tmp_path / "changes.md").read_text()


def test_apply_bench_quick_profile_checks_rows(spark: SparkSession, tmp_path: Path) -> None:
    from eqdelete.tools import apply_bench

    # Each copy (apply_changes with keys, without, MERGE INTO) is checked inside to hold the table's rows.
    [result] = apply_bench.run(spark, apply_bench.default_points(quick=True), tmp_path, runs=1, warmup=0,
                               progress=lambda _m: None)
    assert (result.keys, result.rows, result.upserts) == ("composite", 10**4, 100)
    # Each upsert is an UPDATE_BEFORE and an UPDATE_AFTER; the generator draws each key with
    # probability upserts / rows, so about 100 of them.
    assert 120 <= result.changed_rows <= 300 and result.changed_rows % 2 == 0
    assert set(result.medians) == set(apply_bench.VARIANTS)
    assert (tmp_path / "apply.md").read_text().startswith("| key")


def test_apply_bench_runs_the_variants_named() -> None:
    from eqdelete.tools import apply_bench
    from eqdelete.tools.cli import build_parser

    assert apply_bench.chosen_variants(None) == apply_bench.VARIANTS
    assert apply_bench.chosen_variants("apply_kept, merge") == ("merge", "apply_kept")
    with pytest.raises(ValueError, match="among apply_keys, apply, merge, apply_kept, not 'kept'"):
        apply_bench.chosen_variants("kept")
    # The command line refuses a name before it starts a session.
    args = build_parser().parse_args(["bench", "--apply", "--keys", "uuid", "--at", "1e8", "--only", "apply_kept,fastest"])
    with pytest.raises(SystemExit, match="bench --apply --only takes variants among .*, not 'apply_kept,fastest'"):
        args.run(args)
    # A run of some variants: the others' columns say n/a, not a failure.
    result = apply_bench.ApplyBenchResult(10**8, "uuid", 10**4, 200, 20_000, {"apply_kept": 1.9}, 300.0)
    row = apply_bench.markdown([result]).splitlines()[-1]
    assert row == "| uuid | 100,000,000 | 200 | 10,000 | 20,000 | n/a | n/a | n/a | 1.90 | 300.00 | 1.00 | n/a |", row


def test_resolve_scale_quick_profile_reads_only_the_files_new_deletes_can_touch(spark: SparkSession, tmp_path: Path) -> None:
    from eqdelete.tools import resolve_scale

    points = resolve_scale.default_points(quick=True)
    # Rows are checked inside: the native read after each operation against eqdelete's before.
    results = resolve_scale.run(spark, points, tmp_path, runs=2, time_box=600.0, progress=lambda _m: None)
    assert [(r.layout, r.data_rows, r.delta) for r in results] == [(p.layout, p.data_rows, p.delta) for p in points]
    for point, r in zip(points, results):
        # Exactly the new deletes' keys the history left alive are resolved.
        alive = point.delta_ids(spark).where(point.spec._op(1).isNull()).count()
        assert r.rows_resolved == alive > 0, point
        assert all(v is not None and v > 0 for v in r.seconds.values()) and r.first_resolve_seconds > 0
    scattered, clustered = results
    # Scattered keys: any data file may hold a deleted key. Clustered: only the newest key range's file.
    assert scattered.data_files_read == scattered.data_files == 2
    assert (clustered.data_files_read, clustered.data_files) == (1, 2)
    assert (tmp_path / "resolve-scale.md").read_text().startswith("| axis")
    assert (tmp_path / "resolve-scale.png").stat().st_size > 0


def test_maintain_scale_quick_profile_reads_only_what_was_written_since(spark: SparkSession, tmp_path: Path) -> None:
    from eqdelete.tools import maintain_scale

    [point] = maintain_scale.default_points(quick=True)
    # Rows are checked inside: each round's rows both ways, and the native read after against eqdelete's before.
    [r] = maintain_scale.run(spark, [point], tmp_path, runs=1, progress=lambda _m: None)
    assert r.data_files == 8 and r.build_rows_resolved > 0 and r.index_entries > 0 and 10 < r.bytes_per_key < 200
    assert [s.delete_rows for s in r.rounds] == [100, 400]
    for s in r.rounds:
        # Today's plan reads every data file; the kept index only the commit's own inserts (none here).
        assert s.rows_resolved > 0 and s.today_files_read == 8 and s.kept_files_read == 0, s
        # A table this small: reading its keys costs less than the index's lookups, so auto reads.
        assert s.auto_picks == "reading", s
        assert s.kept_checkpoint_bytes > 0, s  # each round's deltas and manifest
    # After a restart the round restored the index (checked inside) and read no data file of the table's.
    assert r.restart_delete_rows == 400 and r.restart_seconds > 0 and r.restart_files_read == 0 and r.stored_bytes > 0, r
    # So did a new application's first round (a new process, checked inside), leaving the rows right.
    assert r.new_process_seconds > 0 and r.new_process_session_seconds > 0, r
    assert (tmp_path / "maintain-scale.md").read_text().startswith("| key | data rows")
    assert "\n| long | 40,000 |" in (tmp_path / "maintain-scale.md").read_text()
    assert (tmp_path / "maintain-scale.png").stat().st_size > 0


def test_compaction_quick_profile_rewrites_less_than_icebergs(spark: SparkSession, tmp_path: Path) -> None:
    from eqdelete.tools import compaction_bench

    [point] = compaction_bench.default_points(quick=True)
    # Rows are checked inside: both histories must leave the same rows.
    [r] = compaction_bench.run(spark, [point], tmp_path, progress=lambda _m: None)
    iceberg, ours = r.of("iceberg"), r.of("maintain")
    assert iceberg and ours and r.data_files == 10
    # The first compactions come after the same rounds, of the same partition-wide files.
    assert (ours[0].rounds_before, ours[0].files_removed) == (iceberg[0].rounds_before, iceberg[0].files_removed)
    # Later, Iceberg rewrites every data file's deletes again; maintain only the new ones and what the tiers pick.
    assert sum(c.rows_written for c in ours[1:]) < sum(c.rows_written for c in iceberg[1:]), (ours, iceberg)
    assert (tmp_path / "compaction.md").read_text().startswith("| data rows")
    assert (tmp_path / "compaction.png").stat().st_size > 0


def test_scale_quick_profile_checks_rows_against_the_floor(spark: SparkSession, tmp_path: Path) -> None:
    from eqdelete.tools import scale

    points = scale.default_points(quick=True)
    results = scale.run(spark, points, tmp_path, runs=1, warmup=0, time_box=600.0, progress=lambda _m: None)
    assert [(r.axis, r.data_rows) for r in results] == [(p.axis, p.data_rows) for p in points]
    assert all(r.identical for r in results), [(r.axis, r.data_rows, r.delete_rows) for r in results if not r.identical]
    columns = {*eqdelete.STRATEGIES, "floor", "floor_keys", "deletes_read", "data_read"}
    assert all(set(r.medians) == columns and all(v is not None and v > 0 for v in r.medians.values()) for r in results)
    assert all(r.limit == r.medians["floor_keys"] + r.medians["deletes_read"] for r in results)
    assert all(r.x_limit["auto"] == r.medians["auto"] / r.limit and r.x_native["native"] == 1.0 for r in results)
    # The delete axis writes exactly its delete rows (more than the table's rows at the second point).
    assert [r.delete_rows for r in results if r.axis == "delete_rows"] == [2_000, 60_000]
    assert all(r.delete_files >= 1 for r in results)
    assert (tmp_path / "scale.md").read_text().startswith("| axis") and (tmp_path / "scale.png").stat().st_size > 0
    # One point again into the same report, through the merge scale.run saves by: it replaces its
    # earlier result, the others stay. (Its rows were checked above; measuring it again is CI time.)
    again = run_merged(points[:1], lambda p: replace(results[0], medians={**results[0].medians, "auto": 1e-3}),
                       {points[0].key(spark.sparkContext.master)}, tmp_path, "scale", scale.ScaleResult, scale.markdown,
                       scale.chart, lambda _m: None)
    saved = scale.load(tmp_path)
    assert sorted(r.point for r in saved) == sorted(r.point for r in results)
    assert next(r for r in saved if r.point == again[0].point).medians["auto"] == 1e-3
    assert [r.medians for r in saved if r.point != again[0].point] == [r.medians for r in results[1:]]


def test_scale_three_column_key_checks_rows_and_reports_beside_the_long_key(spark: SparkSession, tmp_path: Path) -> None:
    from eqdelete.tools import scale

    # An earlier run's results (the long key's, and others) stay beside this run's in one report.
    earlier = Path(__file__).resolve().parents[1] / "docs" / "benchmark" / "scale.json"
    (tmp_path / "scale.json").write_text(earlier.read_text())
    points = [p for p in scale.default_points(quick=True, keys="composite") if p.axis == "delete_rows"]
    results = scale.run(spark, points, tmp_path, runs=1, warmup=0, time_box=600.0, progress=lambda _m: None)
    assert all(r.identical and r.keys == "composite" for r in results)
    # Each delete row a key of three columns, and the filter's index the hashed one (no bitmap).
    assert spark.table(points[0].table).columns[:3] == ["k1", "k2", "k3"]
    assert [r.delete_rows for r in results] == [2_000, 60_000]
    with eqdelete.use_strategy(spark, "filter"):
        (decision,) = decisions(spark.sql(bench.QUERY.format(t=points[0].table)))
    assert "index of (k1, k2, k3)" in decision.plan and "bitmap" not in decision.plan, decision
    saved = scale.load(tmp_path)
    assert [r.point for r in saved] == [r.point for r in scale.load(earlier.parent)] + [r.point for r in results]
    table = (tmp_path / "scale.md").read_text()
    assert "| delete_rows | long/string/date | 20,000 | 2,000 |" in table and "| delete_rows | long | 10,000,000 | 100,000 |" in table
    with pytest.raises(ValueError, match="unknown key shape 'float'"):
        scale.default_points(keys="float")


def test_scale_uuid_key_reads_its_references_through_iceberg_and_names_natives_wrong_rows(
        spark: SparkSession, tmp_path: Path) -> None:
    from eqdelete.tools import scale

    (point,) = [p for p in scale.default_points(quick=True, keys="uuid_type") if p.axis == "delete_rows"][:1]
    (result,) = scale.run(spark, [point], tmp_path, runs=1, warmup=0, time_box=600.0, progress=lambda _m: None)
    assert result.identical, result
    # Spark's own Parquet reader refuses the uuid column: the references read through Iceberg's.
    assert result.medians["deletes_read"] and result.medians["data_read"], result.medians
    delete_rows = spark.sql(f"SELECT sum(record_count) FROM {point.table}.delete_files").first()[0]
    assert spark.table(f"{point.table}_deletes_files").count() == delete_rows
    # Iceberg pairs uuid delete files with data files by signed bounds, and loses deletes (docs/known-iceberg-issues.md).
    table = (tmp_path / "scale.md").read_text()
    assert ("(native wrong)" in table) == result.native_wrong
    assert ("Iceberg's reader loses deletes of uuid keys" in table) == result.native_wrong


def test_scale_delete_axis_on_another_table_keeps_the_data_axis() -> None:
    from eqdelete.tools import scale

    default, larger = scale.default_points(), scale.default_points(delete_axis_data_rows=10**8)
    assert [p for p in larger if p.axis == "data_rows"] == [p for p in default if p.axis == "data_rows"]
    deletes = [p for p in larger if p.axis == "delete_rows"]
    assert [(p.data_rows, p.delete_rows) for p in deletes] == [(10**8, d) for d in scale.DELETE_AXIS]
    # Its own table and its own result: neither replaces the 10^7-row axis's.
    assert {p.table for p in deletes}.isdisjoint(p.table for p in default)
    assert {p.key("local[*]") for p in deletes}.isdisjoint(p.key("local[*]") for p in default)
    assert deletes[2].stride == 20  # 10^7 deletes over twice their range of 10^8 keys


def test_a_time_boxed_run_is_cancelled_and_not_run_again(spark: SparkSession) -> None:
    from eqdelete.compare import Variant, measure

    # A query that runs far longer than its box: cancelled, reported as infinite, run once only.
    slow = "SELECT count(*) FROM range(0, 2000000000, 1, 2) a WHERE reflect('java.lang.Thread', 'sleep', 1L) IS NOT NULL"
    timings = measure(spark, [Variant("slow", "native", slow, time_box=1.0), Variant("fast", "native", "SELECT 1")],
                      runs=2, warmup=1, keep_rows=True)
    assert timings["slow"].timed_out and timings["slow"].seconds == [float("inf")]
    assert not timings["fast"].timed_out and len(timings["fast"].seconds) == 2 and timings["fast"].rows == [(1,)]
    # The session is usable after the cancellation, without the cancelled job's group.
    assert spark.sql("SELECT count(*) FROM range(10)").first()[0] == 10
    assert spark.sparkContext.getLocalProperty("spark.jobGroup.id") is None


def test_scale_leaves_out_a_native_run_that_would_exhaust_the_heap(spark: SparkSession) -> None:
    from eqdelete.tools import scale

    assert scale.native_out_of_memory(spark, scale.ScalePoint("delete_rows", 10_000, 1_000)) is None
    why = scale.native_out_of_memory(spark, scale.ScalePoint("delete_rows", 10_000, 10**9))
    assert why is not None and why.startswith("not run: Iceberg's reader would hold") and "GB heap" in why
