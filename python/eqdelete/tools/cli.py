"""``python -m eqdelete``: generate CDC tables and run the main job on the embedded catalog."""

from __future__ import annotations

import argparse
import dataclasses
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from eqdelete import _jvm
from eqdelete.tools.cdc import KEY_TYPES, LAYOUTS, PARTITIONINGS, CdcSpec, generate
from eqdelete.tools.scale import KEY_SHAPES
from eqdelete.compare import ResultsDifferError, compare
from eqdelete.config import DEFAULT_CATALOG, DEFAULT_WAREHOUSE, session
from eqdelete.errors import CommitOutcomeUnknownError, ResolveConflictError, ResolveFailedError, one_line
from eqdelete.summary import summarize

#: Exit codes of resolve and maintain --once beyond 0 (done), 1 (failed) and 2 (bad input): 4, a
#: conflict left nothing committed (run it again); 5, the commit's outcome is unknown and nothing
#: was deleted (run it again once the catalog answers).
EXIT_CODES: dict[type, int] = {ResolveConflictError: 4, ResolveFailedError: 1, CommitOutcomeUnknownError: 5}


def _add_session_args(parser: argparse.ArgumentParser, *, remote: bool = True) -> None:
    if remote:
        parser.add_argument("--remote", metavar="sc://HOST:PORT",
                            help="run on this Spark Connect server (started with `connect-server`); --warehouse, --master "
                                 "and --driver-memory are then the server's")
    parser.add_argument("--warehouse", default=DEFAULT_WAREHOUSE, help="local warehouse directory (default: %(default)s)")
    parser.add_argument("--master", default="local[*]", help="Spark master (default: %(default)s)")
    parser.add_argument("--driver-memory", default="8g", help="driver JVM heap; in local mode the executors share it (default: %(default)s)")
    parser.add_argument("--executor-memory", help="each executor JVM's heap, where executors run in their own JVMs "
                                                  "(local-cluster[N,cores,MB], a cluster); Spark's default otherwise")
    parser.add_argument("--conf", action="append", default=[], type=_conf_pair, metavar="KEY=VALUE",
                        help="a Spark setting, repeatable, e.g. a catalog of your own (spark.sql.catalog.lake=...): "
                             "with any spark.sql.catalog.* setting the embedded catalog is not added")


def _conf_pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"a setting should be KEY=VALUE, not {text!r}")
    return key.strip(), value


def _sizes(text: str) -> set[int]:
    """Comma-separated sizes, each an integer or in e notation (1e8)."""
    try:
        return {int(float(part)) for part in text.split(",") if part.strip()}
    except ValueError:
        raise argparse.ArgumentTypeError(f"sizes should be comma-separated numbers such as 1e7,3e7, not {text!r}") from None


def _size(text: str) -> int:
    """One positive size, an integer or in e notation (1e8)."""
    try:
        size = int(float(text))
    except ValueError:
        size = 0
    if size <= 0:
        raise argparse.ArgumentTypeError(f"a size should be a positive number such as 1e8, not {text!r}")
    return size


def _add_cdc_args(parser: argparse.ArgumentParser, *, table: str, rows: int, commits: int) -> None:
    parser.add_argument("--table", default=table, help="table to create (default: %(default)s)")
    parser.add_argument("--rows", type=int, default=rows, help="keys in the base load (default: %(default)s)")
    parser.add_argument("--data-files", type=int, default=4, help="write tasks of the base load (default: %(default)s)")
    parser.add_argument("--commits", type=int, default=commits, help="CDC commits after the base load (default: %(default)s)")
    parser.add_argument("--delete-fraction", type=float, default=0.005, help="share of keys deleted per commit (default: %(default)s)")
    parser.add_argument("--upsert-fraction", type=float, default=0.01, help="share of keys upserted per commit (default: %(default)s)")
    parser.add_argument(
        "--keys", default="long", help=f"comma-separated key column types, 1 to 3 of {', '.join(KEY_TYPES)} (default: %(default)s)"
    )
    parser.add_argument("--partitioning", choices=list(PARTITIONINGS), default="none", help="(default: %(default)s)")
    parser.add_argument("--format-version", type=int, default=2, help="Iceberg format version, 2 or 3 (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="(default: %(default)s)")
    parser.add_argument("--files-per-commit", type=int, default=1, help="delete files per partition per commit (default: %(default)s)")
    parser.add_argument("--layout", choices=list(LAYOUTS), default="scattered",
                        help="base load: every file a random share of the keys (scattered), or one key range each, "
                             "sorted (clustered) (default: %(default)s)")


def _spec(args: argparse.Namespace) -> CdcSpec:
    return CdcSpec(
        table=args.table,
        rows=args.rows,
        data_files=args.data_files,
        commits=args.commits,
        delete_fraction=args.delete_fraction,
        upsert_fraction=args.upsert_fraction,
        key_types=tuple(t.strip() for t in args.keys.split(",") if t.strip()),
        partitioning=args.partitioning,
        format_version=args.format_version,
        seed=args.seed,
        files_per_commit=args.files_per_commit,
        layout=args.layout,
    )


# Sessions this run started; main stops them before the process exits, so the context stops
# in order (application, executors, then local-cluster's workers) rather than racing the JVM's
# shutdown hooks, which left a local-cluster's workers relaunching executors as they went down.
_STARTED: list[Any] = []


def _session(args: argparse.Namespace, name: str):
    spark = _start_session(args, name)
    _STARTED.append(spark)
    return spark


def _start_session(args: argparse.Namespace, name: str):
    given = dict(getattr(args, "conf", None) or [])
    if getattr(args, "remote", None):
        return session(name, conf={**given, "spark.remote": args.remote})
    # Our own progress lines replace Spark's console bar, which would interleave with them.
    conf = {"spark.ui.showConsoleProgress": "false", "spark.driver.memory": args.driver_memory, **given}
    if args.executor_memory:
        conf["spark.executor.memory"] = args.executor_memory
    if args.master != "local" and not args.master.startswith("local["):
        # Executors in their own JVMs report their peak heap with each heartbeat unless polled:
        # a stage shorter than a heartbeat would show none (the scale benchmark reads them).
        conf["spark.executor.metrics.pollingInterval"] = "100ms"
    spark = session(name, master=args.master, warehouse=args.warehouse, conf=conf)
    spark.sparkContext.setLogLevel("ERROR")
    if not getattr(args, "debug", False):
        # A failing round or query is reported in one line; Spark would add each failed task's trace.
        _jvm.quiet_task_failures(spark)
    return spark


def _cmd_generate(args: argparse.Namespace) -> int:
    spec = _spec(args)
    spec.validate()  # before paying for a Spark session
    spark = _session(args, "eqdelete generate")
    generate(spark, spec, replace=args.replace)
    print(summarize(spark, spec.table).render())
    return 0


DEMO_QUERIES = (
    # Integer cents: a floating-point sum depends on the order rows arrive in.
    "SELECT count(*) AS n, sum(CAST(round(amount * 100) AS BIGINT)) AS cents FROM {t}",
    "SELECT region, count(*) AS n, max(version) AS newest FROM {t} GROUP BY region",
    "SELECT * FROM {t} WHERE version > 0 AND amount > 500",
)


def _cmd_demo(args: argparse.Namespace) -> int:
    spec = _spec(args)
    spec.validate()
    spark = _session(args, "eqdelete demo")
    generate(spark, spec, replace=True)
    summary = summarize(spark, spec.table)
    print(summary.render())
    expected = spec.expected(spark).count()
    verdict = "matches" if expected == summary.native_rows else "DOES NOT MATCH"
    print(f"  expected live rows: {expected:,} ({verdict} the native read)")
    if expected != summary.native_rows:
        return 1
    for template in DEMO_QUERIES:
        print()
        print(compare(spark, template.format(t=spec.table), runs=args.runs, warmup=1).render())
    print()
    _print_last_changes(spark, spec.table, spec.key_columns)
    return 0


def _print_last_changes(spark: Any, table: str, keys: list[str], commits: int = 2, sample: int = 6) -> None:
    """The changes of the table's last ``commits`` commits (docs/changes.md): each one's counts, and a few
    rows of the last, its deletes and inserts of one key paired as updates."""
    from eqdelete.changes import changes

    chain = [r[0] for r in spark.sql(f"SELECT snapshot_id FROM {table}.history WHERE is_current_ancestor "
                                     "ORDER BY made_current_at").collect()]
    if len(chain) < 2:
        return
    start = chain[max(0, len(chain) - commits - 1)]
    rows = changes(spark, table, start_snapshot_id=start, compute_updates=True, identifier_columns=keys)
    counts = rows.groupBy("_commit_snapshot_id", "_change_ordinal", "_change_type").count().collect()
    print(f"The changes of the last {len(chain) - chain.index(start) - 1} commits of {table} "
          "(eqdelete.changes, with compute_updates; docs/changes.md):")
    for snapshot, ordinal in sorted({(r[0], r[1]) for r in counts}, key=lambda s: s[1]):
        kinds = {r[2]: r[3] for r in counts if r[0] == snapshot}
        print(f"  snapshot {snapshot}: " + ", ".join(f"{kinds[k]:,} {k}" for k in
                                                        ("INSERT", "DELETE", "UPDATE_BEFORE", "UPDATE_AFTER") if k in kinds))
    last = max((r[1] for r in counts), default=None)
    if last is not None:
        print(f"  a few rows of the last (ordered by {', '.join(keys)}):")
        # UPDATE_BEFORE, then UPDATE_AFTER, of each key.
        updated = rows.where(f"_change_ordinal = {last}").orderBy(*keys, rows["_change_type"].desc()).limit(sample)
        updated.show(sample, truncate=24)


def _cmd_compare(args: argparse.Namespace) -> int:
    strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
    spark = _session(args, "eqdelete compare")
    try:
        comparison = compare(spark, args.sql, strategies, runs=args.runs, warmup=args.warmup)
    except ResultsDifferError as error:
        print(f"eqdelete: {error}", file=sys.stderr)
        return 3
    print(comparison.render())
    if args.chart:
        print(f"chart saved to {comparison.save_chart(args.chart)}")
    return 0


def _cmd_resolve(args: argparse.Namespace) -> int:
    from eqdelete._progress import spark_progress, stderr_reporter
    from eqdelete.resolve import resolve_equality_deletes

    spark = _session(args, "eqdelete resolve")
    with spark_progress(spark, stderr_reporter("eqdelete resolve"), every=args.progress_seconds):
        try:
            result = resolve_equality_deletes(spark, args.table, where=args.where, dry_run=args.dry_run)
        except (ResolveConflictError, ResolveFailedError, CommitOutcomeUnknownError) as error:
            print(str(error), file=sys.stderr)
            return EXIT_CODES[type(error)]
    print(result.render())
    return 0


def _cmd_maintain(args: argparse.Namespace) -> int:
    import json
    import signal
    import threading
    import time

    from eqdelete._progress import spark_progress, stderr_reporter
    from eqdelete.maintain import MaintainRound, maintain

    from eqdelete._processes import children, terminate_children

    report = stderr_reporter("eqdelete maintain")
    stop = threading.Event()
    starting, before = True, children()

    def on_signal(signum: int, _frame: Any) -> None:
        if starting:
            # No round has begun: nothing to save, so no waiting for the JVM and Spark to finish starting
            # (35 s on a loaded machine, past the 30 s a container gets); the JVM starting is stopped too.
            report(f"{signal.Signals(signum).name}: stopped while starting, before any round")
            terminate_children(besides=before)
            raise SystemExit(0)
        if stop.is_set():  # a second signal: stop now
            raise KeyboardInterrupt
        report(f"{signal.Signals(signum).name}: stopping; a round under way ends at its next step (a commit being "
               "sent finishes)")
        stop.set()

    for stopping in (signal.SIGTERM, signal.SIGINT):
        signal.signal(stopping, on_signal)
    if args.tables is not None and not any(key == "spark.scheduler.mode" for key, _ in args.conf):
        # Rounds of several tables share the executors: a small table's round is not queued behind a big one's.
        args.conf.append(("spark.scheduler.mode", "FAIR"))
    spark = _session(args, "eqdelete maintain")
    starting = False  # from here a stop is the rounds' to take: `stop`, checked before each round and at each step
    rounds: list[MaintainRound] = []

    def on_round(result: MaintainRound) -> None:
        rounds.append(result)
        began_ms = round((time.time() - result.seconds) * 1000)
        print(json.dumps({"round": len(rounds), "began_ms": began_ms, **result.as_dict()}), flush=True)  # stdout
        report(f"round {len(rounds)}: {result.render()}")

    def on_unknown(error: Exception) -> None:
        report(f"round {len(rounds) + 1}: {error}")

    if args.tables is not None:
        return _maintain_tables(args, spark, stop, report, on_round)
    with spark_progress(spark, report, every=args.progress_seconds):
        summary = maintain(spark, args.table, interval=args.interval, rounds=1 if args.once else args.rounds,
                           stop=stop, on_round=on_round, on_unknown=on_unknown)
    report(summary.render())
    if args.once and summary.unknown_outcomes:
        return EXIT_CODES[CommitOutcomeUnknownError]
    return 4 if args.once and rounds and rounds[-1].gave_up else 0


def _maintain_tables(args: argparse.Namespace, spark: Any, stop: Any, report: Callable[[str], None],
                     on_round: Callable[[Any], None]) -> int:
    from eqdelete._progress import spark_progress
    from eqdelete.service import maintain_tables

    if args.once or args.rounds is not None:
        raise ValueError("--once and --rounds take --table; --tables runs until stopped")
    with spark_progress(spark, report, every=args.progress_seconds):
        summary = maintain_tables(spark, args.tables, interval=args.interval, concurrency=args.concurrency,
                                  rescan=args.rescan, stop=stop, on_round=on_round,
                                  on_event=lambda event: report(event.render()))
    report(summary.render())
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    from eqdelete.status import as_json, by_debt, render, status

    spark = _session(args, "eqdelete status")
    statuses = status(spark, args.tables)
    print(as_json(by_debt(statuses)) if args.json else render(statuses))
    return 0


def _cmd_lakehouse(args: argparse.Namespace) -> int:
    import signal
    import threading

    from eqdelete.config import server_settings_text
    from eqdelete.tools.lakehouse import Lakehouse, aws_bundle

    stop = threading.Event()
    for stopping in (signal.SIGTERM, signal.SIGINT):
        signal.signal(stopping, lambda *_: stop.set())
    with Lakehouse(args.root) as lake:
        spark = {**lake.spark_options(args.catalog), "spark.jars.packages": aws_bundle("<your Iceberg release>")}
        flink = ", ".join(f"'{k}'='{v}'" for k, v in {"type": "iceberg", **lake.flink_properties()}.items())
        print(f"s3proxy on {lake.s3_endpoint} (bucket {lake.warehouse.split('/')[2]} in {lake.root / 's3'}), "
              f"Iceberg's REST catalog on {lake.rest_uri}, warehouse {lake.warehouse}\n")
        print("spark-defaults.conf (besides eqdelete's own lines):\n" + server_settings_text(spark) + "\n")
        print(f"Flink SQL:\n  CREATE CATALOG {args.catalog} WITH ({flink});\n")
        print(f"pyiceberg:\n  load_catalog({args.catalog!r}, **{lake.pyiceberg_properties()!r})\n")
        print("Ctrl-C or SIGTERM stops both.", flush=True)
        stop.wait()
    return 0


def _only(items: list, only: str | None, name: Callable[[Any], str], noun: str) -> list:
    """The items named in the comma-separated ``only`` (all when None); unknown names fail."""
    if not only:
        return items
    wanted = {w.strip() for w in only.split(",") if w.strip()}
    known = list(dict.fromkeys(name(i) for i in items))
    unknown = wanted - set(known)
    if unknown:
        raise ValueError(f"unknown {noun} {', '.join(sorted(unknown))}: choose from {', '.join(known)}")
    return [i for i in items if name(i) in wanted]


def _scale_points(points: list, args: argparse.Namespace) -> list:
    """The scale points ``--only`` (axes) and ``--at`` (sizes on their axis) pick."""
    points = _only(points, args.only, lambda p: p.axis, "axis")
    return [p for p in points if not args.at or p.size in args.at] or _none_at(points, args)


def _none_at_sizes(args: argparse.Namespace, sizes: list[int]) -> list:
    raise ValueError(f"no size in --at {', '.join(f'{a:,}' for a in sorted(args.at))}: choose from "
                     f"{', '.join(f'{s:,}' for s in sizes)}")


def _none_at(points: list, args: argparse.Namespace) -> list:
    sizes = ", ".join(f"{p.axis} {p.size:,}" for p in points)
    raise ValueError(f"no scale point has a size in --at {', '.join(f'{a:,}' for a in sorted(args.at))}: choose from {sizes}")


def resolve_bench_scenarios(quick: bool, rows_factor: float) -> list:
    """The benchmark's CDC table and the streaming-upsert table of many small commits, the
    latter also as format v3 (deletion vectors)."""
    from dataclasses import replace

    from eqdelete.tools import bench

    if quick:
        tiny = [s for s in bench.quick_scenarios() if s.name == "cdc_upsert"]
        stream = bench.streaming_upsert(0.005, commits=4)
        stream = replace(stream, spec=replace(stream.spec, files_per_commit=2))
    else:
        tiny = [s for s in bench.default_scenarios(rows_factor) if s.name == "cdc_upsert"]
        stream = bench.streaming_upsert(rows_factor)
    v3 = replace(stream, name=f"{stream.name}_v3", description=f"{stream.description}, format v3",
                 spec=replace(stream.spec, table=f"{stream.spec.table}_v3", format_version=3))
    return tiny + [stream, v3]


def _cmd_bench(args: argparse.Namespace) -> int:
    from pathlib import Path

    from eqdelete.tools import bench

    if args.planning:
        spark = _session(args, "eqdelete bench --planning")
        scenario = bench.streaming_upsert(0.005, commits=4) if args.quick else bench.streaming_upsert(args.rows_factor)
        result = bench.planning(spark, scenario, runs=1 if args.quick else args.runs, out=Path(args.out))
        print(result.markdown())
        print(f"results in {args.out}/planning.json, planning.md")
        return 0

    if args.peer:
        from eqdelete._progress import stderr_reporter
        from eqdelete.tools import peer

        if args.keys:  # the scale benchmark's delete axis with that key
            every = peer.keyed_scenarios(args.keys, args.quick, tuple(sorted(args.at)) if args.at else peer.KEYED_DELETE_ROWS)
        else:
            every = peer.scenarios(args.quick, args.rows_factor)
        picked = _only(every, args.only, lambda s: s.name, "scenario")
        spark = _session(args, f"eqdelete bench --peer {args.peer}")
        runs, warmup = (1, 0) if args.quick else (args.runs, 1)
        try:
            results = peer.run(spark, picked, Path(args.out), runs=runs, warmup=warmup,
                               report=stderr_reporter(f"eqdelete bench --peer {args.peer}"))
        except peer.RowsDifferError as error:  # in full: both engines' rows
            print(f"eqdelete: {error}", file=sys.stderr)
            return 3
        print(peer.markdown(results))
        print(f"results in {args.out}/peer.json, peer.md, peer.png")
        return 0

    if args.lakehouse:
        if args.apply and not args.changes_lag_ms:
            print("eqdelete: --lakehouse --apply applies the changes stream's batches to a copy: give --changes-lag-ms too",
                  file=sys.stderr)
            return 2
        from eqdelete import _jars
        from eqdelete._progress import stderr_reporter
        from eqdelete.tools import lakehouse_bench
        from eqdelete.tools.lakehouse import Lakehouse, aws_bundle, spark_jars

        out = Path(args.out)
        with Lakehouse(out / "lakehouse-servers", log_requests=True) as lake:
            iceberg = _jars.supported_line().default_iceberg
            jars = spark_jars(iceberg)
            aws = ("spark.jars", ",".join(jars)) if jars else ("spark.jars.packages", aws_bundle(iceberg))
            args.conf = [*args.conf, *lake.spark_options("lake").items(), aws]
            spark = _session(args, "eqdelete bench --lakehouse")
            sizes = lakehouse_bench.Sizes.quick() if args.quick else lakehouse_bench.Sizes()
            if args.seed_rows:
                sizes = dataclasses.replace(sizes, seed_rows=args.seed_rows)
            streams = (() if args.streams == "none" else tuple(s.strip() for s in args.streams.split(",") if s.strip())
                       ) if args.streams else lakehouse_bench.DEFAULT_STREAMS
            results = lakehouse_bench.run(spark, lake, out, sizes=sizes, runs=1 if args.quick else args.runs,
                                          progress=stderr_reporter("eqdelete bench --lakehouse"), streams_of=streams,
                                          with_reads=not args.skip_reads, latencies_ms=tuple(sorted(args.latency_ms or ())),
                                          writer_intervals_ms=tuple(sorted(args.writer_intervals_ms or ())),
                                          changes_lag_ms=tuple(sorted(args.changes_lag_ms or ())),
                                          apply_changes_lag=args.apply)
            _stop_sessions()  # before the servers it reads from stop
        print(lakehouse_bench.markdown(results))
        print(f"results in {args.out}/lakehouse.json, lakehouse.md, lakehouse.png")
        return 0

    if args.live_index_probe:
        from eqdelete._progress import stderr_reporter
        from eqdelete.tools import live_index_probe

        sizes = tuple(sorted(args.at)) if args.at else ((10**4, 10**5) if args.quick else live_index_probe.SIZES)
        spark = _session(args, "eqdelete bench --live-index-probe")
        points = live_index_probe.run(spark, sizes, stderr_reporter("eqdelete bench --live-index-probe"),
                                      puts=args.live_index_probe == "both")
        live_index_probe.save(points, Path(args.out))
        print(live_index_probe.markdown(points))
        print(f"results in {args.out}/live-index-probe.json, live-index-probe.md")
        return 0

    if args.maintain_scale:
        from eqdelete.tools import maintain_scale

        points = maintain_scale.default_points(quick=args.quick, keys=args.keys or "long")
        points = [p for p in points if not args.at or p.size in args.at] or _none_at(points, args)
        spark = _session(args, "eqdelete bench --maintain-scale")
        results = maintain_scale.run(spark, points, Path(args.out), runs=1 if args.quick else args.runs)
        print(maintain_scale.markdown(results))
        print(f"results in {args.out}/maintain-scale.json, maintain-scale.md, maintain-scale.png")
        return 0

    if args.apply:
        from eqdelete.tools import apply_bench

        keys = (args.keys,) if args.keys else tuple(apply_bench.KEYS)
        if any(k not in apply_bench.KEYS for k in keys):
            raise SystemExit(f"bench --apply: --keys is one of {', '.join(apply_bench.KEYS)}, not {args.keys}")
        try:
            variants = apply_bench.chosen_variants(args.only)
        except ValueError as e:
            raise SystemExit(str(e)) from None
        sizes = tuple(sorted(args.at)) if args.at else None
        points = apply_bench.default_points(quick=args.quick, sizes=sizes, keys=keys)
        spark = _session(args, "eqdelete bench --apply")
        results = apply_bench.run(spark, points, Path(args.out), runs=1 if args.quick else args.runs,
                                  warmup=0 if args.quick else 1, variants=variants)
        print(apply_bench.markdown(results))
        print(f"results in {args.out}/apply.json, apply.md")
        return 0

    if args.changes:
        from eqdelete.tools import changes_bench

        points = changes_bench.default_points(quick=args.quick, keys=args.keys or "long")
        points = [p for p in points if not args.at or p.rows in args.at] or _none_at_sizes(args, [p.rows for p in points])
        spark = _session(args, "eqdelete bench --changes")
        results = changes_bench.run(spark, points, Path(args.out), runs=1 if args.quick else args.runs,
                                    warmup=0 if args.quick else 1, reuse=args.reuse_tables,
                                    only_row_images=args.only_row_images)
        print(changes_bench.markdown(results))
        print(f"results in {args.out}/changes.json, changes.md")
        return 0

    if args.compaction:
        from eqdelete.tools import compaction_bench

        points = compaction_bench.default_points(quick=args.quick)
        points = [p for p in points if not args.at or p.size in args.at] or _none_at(points, args)
        spark = _session(args, "eqdelete bench --compaction")
        results = compaction_bench.run(spark, points, Path(args.out))
        print(compaction_bench.markdown(results))
        print(f"results in {args.out}/compaction.json, compaction.md, compaction.png")
        return 0

    if args.resolve and args.scale:
        from eqdelete.tools import resolve_scale

        points = _scale_points(resolve_scale.default_points(quick=args.quick), args)
        spark = _session(args, "eqdelete bench --resolve --scale")
        results = resolve_scale.run(spark, points, Path(args.out), runs=1 if args.quick else args.runs,
                                    time_box=args.time_box)
        print(resolve_scale.markdown(results))
        print(f"results in {args.out}/resolve-scale.json, resolve-scale.md, resolve-scale.png")
        return 0

    if args.resolve:
        from eqdelete.tools import resolve_bench

        spark = _session(args, "eqdelete bench --resolve")
        scenarios = resolve_bench_scenarios(args.quick, args.rows_factor)
        scenarios = _only(scenarios, args.only, lambda s: s.name, "scenario")
        results = resolve_bench.run(spark, scenarios, Path(args.out), runs=1 if args.quick else args.runs,
                                    warmup=0 if args.quick else 1)
        print(resolve_bench.markdown(results))
        print(f"results in {args.out}/resolve.json, resolve.md")
        return 0

    if args.scale:
        from eqdelete.tools import scale

        points = scale.default_points(quick=args.quick, delete_axis_data_rows=args.delete_axis_data_rows, keys=args.keys or "long")
        points = _scale_points(points, args)
        if args.max_rows is not None:
            points = [p for p in points if max(p.data_rows, p.delete_rows) <= args.max_rows]
        spark = _session(args, "eqdelete bench --scale")
        runs, warmup = (1, 0) if args.quick else (args.runs, 1)
        results = scale.run(spark, points, Path(args.out), runs=runs, warmup=warmup, time_box=args.time_box)
        print(scale.markdown(results))
        print(f"results in {args.out}/scale.json, scale.md, scale.png")
        return 0 if all(r.identical for r in results) else 3

    scenarios = bench.quick_scenarios() if args.quick else bench.default_scenarios(args.rows_factor)
    scenarios = _only(scenarios, args.only, lambda s: s.name, "scenario")
    spark = _session(args, "eqdelete bench")
    runs, warmup = (1, 0) if args.quick else (args.runs, 1)
    results = bench.run(spark, scenarios, Path(args.out), runs=runs, warmup=warmup)
    print(bench.markdown(results))
    print(f"results in {args.out}/results.json, results.md, results.png")
    return 0 if all(r.identical for r in results) else 3


def _cmd_sweep(args: argparse.Namespace) -> int:
    from pathlib import Path

    from eqdelete.tools import sweep

    points = _only(sweep.default_points(quick=args.quick), args.only, lambda p: p.axis, "axis")
    spark = _session(args, "eqdelete sweep")
    runs, warmup = (1, 0) if args.quick else (args.runs, 1)
    base_rows = 20_000 if args.quick else args.base_rows
    results = sweep.run(spark, points, Path(args.out), base_rows=base_rows, runs=runs, warmup=warmup)
    print(sweep.markdown(results))
    print(f"results in {args.out}/sweep.json, sweep.md, sweep.png")
    return 0


def _cmd_docs(args: argparse.Namespace) -> int:
    from pathlib import Path

    from eqdelete import _jvm

    spark = session("eqdelete docs", master="local[1]", catalog=None, conf={"spark.ui.enabled": "false"})
    reference = DOCS_HEADER + _jvm.conf_reference(spark)
    if not args.write:
        print(reference, end="")
        return 0
    root = Path(__file__).resolve().parents[3]
    for path, text in ((root / "docs" / "configuration.md", reference),
                       (Path(__file__).resolve().parents[1] / "conf_rules.json", _jvm.conf_rules_json(spark))):
        path.write_text(text)
        print(f"wrote {path}")
    return 0


DOCS_HEADER = """# Configuration

Every `spark.eqdelete.*` key, generated from the extension's own declarations
(`EqDeleteConf.scala`) by `python -m eqdelete docs --write`; a test fails when this copy is stale.
Keys can be set in spark-defaults.conf, on a session builder, or at run time with
`SET key=value` / `spark.conf.set`; a bad value fails naming the key and the allowed values.

"""


def _cmd_connect_server(args: argparse.Namespace) -> int:
    import shlex

    from eqdelete.connect import run_server, server_command

    command = server_command(port=args.port, master=args.master, warehouse=args.warehouse,
                             driver_memory=args.driver_memory, conf=dict(args.conf))
    if args.print_only:
        print(shlex.join(command))
        return 0
    print(f"eqdelete: Spark Connect server on sc://localhost:{args.port} (Ctrl-C or SIGTERM stops it)", file=sys.stderr)
    return run_server(command)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m eqdelete", description=__doc__)
    parser.add_argument("--debug", action="store_true", help="show the full traceback of an error, and Spark's traces of failed tasks")
    commands = parser.add_subparsers(dest="command", required=True)

    gen = commands.add_parser("generate", help="create a CDC table with equality deletes")
    _add_session_args(gen)
    _add_cdc_args(gen, table=f"{DEFAULT_CATALOG}.db.cdc", rows=100_000, commits=10)
    gen.add_argument("--replace", action="store_true", help="drop the table first if it exists")
    gen.set_defaults(run=_cmd_generate)

    demo = commands.add_parser("demo", help="the main job: generate a CDC table on the embedded catalog and summarise it")
    _add_session_args(demo)
    _add_cdc_args(demo, table=f"{DEFAULT_CATALOG}.demo.cdc", rows=200_000, commits=10)
    demo.add_argument("--runs", type=int, default=3, help="timed runs per strategy (default: %(default)s)")
    demo.set_defaults(run=_cmd_demo)

    cmp = commands.add_parser("compare", help="run one query under each strategy; same rows? how fast?")
    _add_session_args(cmp)
    cmp.add_argument("--sql", required=True, help="the query, reading at least one Iceberg table with equality deletes")
    cmp.add_argument("--strategies", default="native,filter,join,auto", help="(default: %(default)s)")
    cmp.add_argument("--runs", type=int, default=5, help="timed runs per strategy, median reported (default: %(default)s)")
    cmp.add_argument("--warmup", type=int, default=1, help="untimed runs first (default: %(default)s)")
    cmp.add_argument("--chart", help="also save a PNG bar chart here")
    cmp.set_defaults(run=_cmd_compare)

    bench = commands.add_parser("bench", help="the benchmark: every scenario under every strategy and the floor")
    _add_session_args(bench, remote=False)  # it reads the driver's heap and plan timers: a local JVM
    bench.add_argument("--quick", action="store_true", help="tiny tables, one run: checks rows, not speed (CI)")
    bench.add_argument("--rows-factor", type=float, default=1.0, help="multiply every scenario's rows (default: %(default)s)")
    bench.add_argument("--only", help="comma-separated scenario names (with --scale: axes, data_rows or delete_rows; "
                            "with --resolve --scale: data_rows or delta; with --apply: variants, of apply_keys, apply, "
                            "merge and apply_kept)")
    bench.add_argument("--runs", type=int, default=5, help="timed runs per strategy (default: %(default)s)")
    bench.add_argument("--out", default="bench-results", help="output directory (default: %(default)s)")
    bench.add_argument("--planning", action="store_true",
                       help="instead: seconds to plan a query, cold and warm, per strategy, on a streaming-upsert "
                            "table of many small commits")
    bench.add_argument("--resolve", action="store_true",
                       help="instead: time resolve_equality_deletes against Iceberg's rewrite_data_files, and the "
                            "native read after, on the CDC table and a streaming-upsert table; with --scale: a "
                            "resolve of new deletes against data rows 10^6-10^8 and new delete rows 10^3-10^6, "
                            "scattered and clustered, beside rewrite_data_files and rewrite_position_delete_files")
    bench.add_argument("--lakehouse", action="store_true",
                       help="instead: on an object store behind a REST catalog (s3proxy and Iceberg's, started and "
                            "stopped here), a Flink-written table's reads under every strategy beside the floor and "
                            "the limit, with each strategy's GETs of delete files; then maintain, maintain with data compaction, "
                            "and rewrite_data_files, every cadence while Flink writes (docs/lakehouse.md)")
    bench.add_argument("--streams", help="with --lakehouse: which ways of keeping the stream's table to run, "
                                         "comma-separated, or none (default: maintain,maintain+compaction,rewrite_data_files; "
                                         "also maintain-once, rounds without the kept index, and maintain-index, every round "
                                         "through it; maintain's rounds choose, auto)")
    bench.add_argument("--seed-rows", type=_size, metavar="N",
                       help="with --lakehouse: each stream's table starts as a scattered table of N rows (10^6 a data "
                            "file) before Flink's job upserts into it, e.g. 1e8")
    bench.add_argument("--skip-reads", action="store_true", help="with --lakehouse: only the streams, not the reads")
    bench.add_argument("--latency-ms", type=_sizes, metavar="MS,MS",
                       help="with --lakehouse: also the reads and a round of maintain with this many milliseconds to the "
                            "first byte of every request to the store, e.g. 20,50 (a proxy of the benchmark's own)")
    bench.add_argument("--live-index-probe", nargs="?", const="both", choices=["both", "sorted"],
                       help="instead: what an index of the live rows by key (eqdelete.liveindex.LiveKeyStore, RocksDB on the "
                            "executors' disks) costs per entry to load, look up and update, and its bytes per entry; "
                            "'sorted': only the load Spark sorts for; sizes with --at (default: 1e6,1e7,1e8)")
    bench.add_argument("--maintain-scale", action="store_true",
                       help="instead: rounds of maintain of 10^3, 10^4 and 10^5 new delete rows on scattered tables of "
                            "10^6 to 3x10^8 rows, today's plan against the kept index of the live rows, with the index's build "
                            "time and bytes per key, then a restart inside the application and as a new one (a new process's first "
                            "round); sizes with --at (data rows); run it with --master local-cluster[2,1,MB]")
    bench.add_argument("--changes", action="store_true",
                       help="instead: seconds to read one commit's changes (10^4 upserts) on scattered tables of 10^6, "
                            "10^7 and 10^8 rows, beside the difference of two time-travel reads (EXCEPT ALL), then new "
                            "commits' changes with kept row images and without, and after a restart inside the application and as "
                            "a new one; sizes with --at (data rows)")
    bench.add_argument("--apply", action="store_true",
                       help="instead: seconds to apply one commit's changes (10^4 upserts) to a copy of 10^6, 10^7 and "
                            "10^8 rows with apply_changes, with keys and without, beside MERGE INTO, for a long, a UUID "
                            "string and a (long, string, date) key; every copy checked to hold the table's rows; sizes "
                            "with --at (copy rows), one key with --keys (long, uuid or composite). With --lakehouse "
                            "--changes-lag-ms: the changes stream's consumer applies each micro-batch to a copy, and the "
                            "lag is until the copy holds a commit")
    bench.add_argument("--reuse-tables", action="store_true",
                       help="with --changes: measure the tables an earlier run generated, where they exist, instead of "
                            "generating them again (what their first commit changed is measured; the commits kept row "
                            "images' runs added stay)")
    bench.add_argument("--only-row-images", action="store_true",
                       help="with --changes: only the part with kept row images (their build, then new commits' changes "
                            "with them and without), not the first commit's changes against EXCEPT ALL")
    bench.add_argument("--compaction", action="store_true",
                       help="instead: compacting a v2 table's position delete files as rounds of maintain pile them up, "
                            "maintain's compaction against Iceberg's rewrite_position_delete_files, on scattered tables "
                            "of 10^7 rows over 150 rounds; sizes with --at (data rows)")
    bench.add_argument("--writer-intervals-ms", type=_sizes, metavar="MS,MS",
                       help="with --lakehouse: then maintain beside a Flink job committing every one of these intervals, "
                            "e.g. 1000,2000,10000, and its lag")
    bench.add_argument("--changes-lag-ms", type=_sizes, metavar="MS,MS",
                       help="with --lakehouse: then the changes stream's lag (commit to a consumer's micro-batch done) "
                            "beside a Flink job committing every one of these intervals, e.g. 1000,10000, without and "
                            "with maintain on the table")
    bench.add_argument("--peer", choices=["trino"],
                       help="instead: the same tables and queries on another engine (Trino 483, assembled into "
                            "build/ from Maven coordinates and run on loopback here on a Java 25: "
                            "EQDELETE_TRINO_JAVA_HOME or one under /usr/lib/jvm) and on Spark, each engine's time over its own floor")
    bench.add_argument("--scale", action="store_true",
                       help="instead: how cost grows, data rows 10^6-10^8 and delete rows 10^5-3x10^7 (PERFORMANCE.md)")
    bench.add_argument("--delete-axis-data-rows", type=_size,
                       help="with --scale: keys in the delete axis's table (default: 10^7), e.g. 1e8 for 10^8 data rows "
                            "under 10^7 delete rows; best written to its own --out, its chart's delete axis being one table")
    bench.add_argument("--max-rows", type=int, help="with --scale: only points of at most this many data and delete rows")
    bench.add_argument("--at", type=_sizes, help="with --scale: only the points of these sizes on their axis (data rows "
                                                 "on data_rows, delete rows on delete_rows, new delete rows on delta), e.g. 1e8,1e7")
    bench.add_argument("--keys", choices=list(KEY_SHAPES),
                       help="with --scale: the tables' key, one long column, one string column ('key-<n>'), a "
                            "random 36-character UUID string, the same in Iceberg's uuid type, or (long, string, "
                            "date) (default: long); with --apply: one of long, uuid, composite (default: all three); "
                            "with --maintain-scale and --changes: the tables' key (default: long); with --peer: instead of "
                            "its three tables, the scale benchmark's delete axis with that key at 10^6 and 10^7 delete "
                            "rows (--at: others)")
    bench.add_argument("--time-box", type=float, default=600.0,
                       help="with --scale: seconds a native run (with --resolve: rewrite_data_files) may take before it is "
                            "cancelled and shown as '> N s' "
                            "(default: %(default)s)")
    bench.set_defaults(run=_cmd_bench)

    swp = commands.add_parser("sweep", help="where the strategies cross over: delete rows, delete files, key columns, key type")
    _add_session_args(swp, remote=False)
    swp.add_argument("--quick", action="store_true", help="tiny tables, one run: checks rows, not speed (CI)")
    swp.add_argument("--only", help="comma-separated axes: delete_rows, delete_files, key_columns, key_type")
    swp.add_argument("--base-rows", type=int, default=2_000_000, help="keys in each point's table (default: %(default)s)")
    swp.add_argument("--runs", type=int, default=3, help="timed runs per variant (default: %(default)s)")
    swp.add_argument("--out", default="bench-results", help="output directory (default: %(default)s)")
    swp.set_defaults(run=_cmd_sweep)

    res = commands.add_parser(
        "resolve",
        help="turn a table's equality deletes into position deletes (v2) or deletion vectors (v3), in one commit")
    _add_session_args(res)
    res.add_argument("--table", required=True, help="the Iceberg table, catalog.namespace.table")
    res.add_argument("--where", help="resolve only the partitions this SQL filter selects wholly (e.g. \"region = 3\")")
    res.add_argument("--dry-run", action="store_true", help="count what would be resolved; write nothing")
    res.add_argument("--progress-seconds", type=float, default=5.0, help="how often to report progress (default: %(default)s)")
    res.set_defaults(run=_cmd_resolve)

    mnt = commands.add_parser(
        "maintain",
        help="keep a live table resolved while its writer commits: a round every --interval seconds until stopped "
             "(SIGTERM/SIGINT stop it, the round under way at its next step); a JSON line per round on stdout")
    _add_session_args(mnt)
    which = mnt.add_mutually_exclusive_group(required=True)
    which.add_argument("--table", help="the Iceberg table, catalog.namespace.table")
    which.add_argument("--tables", metavar="PATTERN",
                       help="every table the pattern names, from one application: a namespace (lake.db), a catalog "
                            "(lake), globs on any part (lake.db.orders_*), several separated by commas; listed again "
                            "every --rescan seconds. Per-table settings: the eqdelete.maintain.* table properties")
    mnt.add_argument("--interval", type=float, default=60.0, help="seconds from one round's start to the next's (default: %(default)s)")
    mnt.add_argument("--concurrency", type=int, default=2, help="with --tables: rounds run at once (default: %(default)s)")
    mnt.add_argument("--rescan", type=float, default=60.0,
                     help="with --tables: seconds between listings of the tables (default: %(default)s)")
    mnt.add_argument("--once", action="store_true", help="one round, then exit (for schedulers such as Airflow or cron); "
                                                         "exit code 4 when every attempt conflicted, 5 when the "
                                                         "commit's outcome is unknown")
    mnt.add_argument("--rounds", type=int, help="stop after this many rounds (default: until stopped)")
    mnt.add_argument("--progress-seconds", type=float, default=30.0,
                     help="how often to report a long round's progress (default: %(default)s)")
    mnt.set_defaults(run=_cmd_maintain)

    st = commands.add_parser(
        "status",
        help="each table's equality-delete debt from metadata: live equality deletes, the lag, native's cost over the "
             "floor, position delete files per data file, dead rows, and what maintain would do next")
    _add_session_args(st)
    st.add_argument("--tables", required=True, metavar="PATTERN",
                    help="a table, a namespace (lake.db), a catalog (lake), or globs (lake.db.orders_*); comma-separated")
    st.add_argument("--json", action="store_true", help="print the rows as JSON, every field")
    st.set_defaults(run=_cmd_status)

    lake = commands.add_parser(
        "lakehouse",
        help="run an S3-compatible store (s3proxy) and Iceberg's REST catalog on loopback until stopped, printing "
             "the Spark, Flink and pyiceberg settings that reach them")
    lake.add_argument("--root", default="lakehouse", help="the store's and the catalog's files (default: %(default)s)")
    lake.add_argument("--catalog", default="lake", help="the catalog's name in the printed settings (default: %(default)s)")
    lake.set_defaults(run=_cmd_lakehouse)

    server = commands.add_parser(
        "connect-server",
        help="run a Spark Connect server with eqdelete loaded, on the embedded catalog, until stopped")
    _add_session_args(server, remote=False)
    server.add_argument("--port", type=int, default=15002, help="the server's gRPC port (default: %(default)s)")
    server.add_argument("--print", action="store_true", dest="print_only",
                        help="print the spark-submit command line instead of running it")
    server.set_defaults(run=_cmd_connect_server)

    docs = commands.add_parser("docs", help="print the configuration reference (docs/configuration.md)")
    docs.add_argument("--write", action="store_true",
                      help="in a checkout, write docs/configuration.md and python/eqdelete/conf_rules.json")
    docs.set_defaults(run=_cmd_docs)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command. Errors print one line and a non-zero exit code (2: bad input, such as
    arguments, SQL or a table that does not exist; 1: anything else); --debug adds the traceback."""
    from pyspark.errors import AnalysisException, IllegalArgumentException

    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except KeyboardInterrupt:
        print("eqdelete: interrupted", file=sys.stderr)
        return 130
    except Exception as error:  # noqa: BLE001 - the one place errors become exit codes
        if args.debug:
            traceback.print_exc()
        user_error = isinstance(error, (ValueError, FileNotFoundError, AnalysisException, IllegalArgumentException))
        hint = "" if args.debug or user_error else " (run with --debug for the traceback)"
        line = one_line(error)
        print(f"{'' if line.startswith('eqdelete') else 'eqdelete: '}{line}{hint}", file=sys.stderr)
        return 2 if user_error else 1
    finally:
        _stop_sessions()


def _stop_sessions() -> None:
    while _STARTED:
        spark = _STARTED.pop()
        try:
            spark.stop()
        except Exception as error:  # noqa: BLE001 - the command's outcome is already decided
            print(f"eqdelete: stopping the Spark session failed: {one_line(error)}", file=sys.stderr)
