"""Every py4j call into the extension's JVM side, in one place."""

from __future__ import annotations

from typing import Any, Callable, Optional

from pyspark.sql import DataFrame, SparkSession

from eqdelete.errors import from_jvm


def _jsession(spark: SparkSession) -> Any:
    return spark._jsparkSession  # noqa: SLF001


def _class(spark: SparkSession, name: str) -> Any:
    """The JVM class ``name`` (fully qualified), for its static methods.

    Named whole, not walked as ``jvm.a.b.C``: py4j resolves each part of such a walk with a
    ``Class.forName`` that fails for every package (``a``, ``a.b``), and a failed lookup searches
    every jar on the class path, a millisecond or more each time."""
    from py4j.java_gateway import JavaClass

    return JavaClass(name, spark.sparkContext._gateway._gateway_client)  # noqa: SLF001


def _list(jcollection: Any) -> list[Any]:
    """A Java collection's elements. Through an array, not py4j's iterator, which ends each pass
    with a Java exception (that pyspark converts, at the cost of tens of class lookups)."""
    return list(jcollection.toArray())


def _strings(spark: SparkSession, jcollection: Any) -> list[str]:
    """A Java collection of strings without line breaks, in one call."""
    joined = str(_class(spark, "java.lang.String").join("\n", jcollection))
    return joined.split("\n") if joined else []


def _dict(jmap: Any) -> dict[str, Any]:
    """A Java map's entries (its values as py4j returns them)."""
    return {str(key): jmap.get(key) for key in jmap.keySet().toArray()}


#: Spark's loggers that print a failed task's whole stack trace (the executor's "Exception in
#: task", the task set's "Lost task" and "aborting job"), once per failed task.
TASK_FAILURE_LOGGERS = ("org.apache.spark.executor.Executor", "org.apache.spark.scheduler.TaskSetManager")


def quiet_task_failures(spark: SparkSession) -> None:
    """Keep Spark's task-failure traces off the console: the failed job's error reaches the caller
    all the same (the command line prints it in one line)."""
    configurator = _class(spark, "org.apache.logging.log4j.core.config.Configurator")
    off = _class(spark, "org.apache.logging.log4j.Level").OFF
    for logger in TASK_FAILURE_LOGGERS:
        configurator.setLevel(logger, off)


def validate_conf(spark: SparkSession) -> None:
    """Read every spark.eqdelete.* key so a bad value fails now, naming the key."""
    conf = _jsession(spark).sessionState().conf()
    _class(spark, "org.apache.spark.sql.eqdelete.compat.EqDeleteConf").validate(conf)


def why_unsupported(spark: SparkSession) -> str | None:
    """Why the eqdelete jar on the classpath stands aside (versions it was not built for), or
    None: supported, or no eqdelete jar at all."""
    try:
        reason = _class(spark, "org.apache.spark.sql.eqdelete.compat.SupportedVersions").unsupported()
        return str(reason.get()) if reason.isDefined() else None
    except Exception:  # noqa: BLE001 - no eqdelete classes in this JVM
        return None


def conf_reference(spark: SparkSession) -> str:
    """The Markdown table of every spark.eqdelete.* key, generated from the JVM side."""
    return _class(spark, "org.apache.spark.sql.eqdelete.compat.EqDeleteConf").markdownReference()


def conf_rules_json(spark: SparkSession) -> str:
    """Every spark.eqdelete.* key's value rule as JSON (python/eqdelete/conf_rules.json)."""
    return _class(spark, "org.apache.spark.sql.eqdelete.compat.EqDeleteConf").rulesJson()


def strategy_names(spark: SparkSession) -> list[str]:
    """The values spark.eqdelete.strategy accepts, as the JVM declares them."""
    return _strings(spark, _class(spark, "org.apache.spark.sql.eqdelete.compat.EqDeleteConf").strategyNames())


def commit_equality_deletes(
    spark: SparkSession,
    table: str,
    columns: list[str],
    deletes: DataFrame | None,
    inserts: DataFrame | None,
    global_deletes: bool,
) -> tuple[int, int, int]:
    """Write and commit in one RowDelta; returns (snapshot id, data files, delete files)."""
    jcolumns = _class(spark, "java.util.ArrayList")()
    for column in columns:
        jcolumns.add(column)
    result = _calling(lambda: _class(spark, "eqdelete.write.EqualityDeleteWriter").commit(
        _jsession(spark),
        table,
        jcolumns,
        deletes._jdf if deletes is not None else None,  # noqa: SLF001
        inserts._jdf if inserts is not None else None,  # noqa: SLF001
        global_deletes,
    ))
    return result.snapshotId(), result.dataFiles(), result.deleteFiles()


def _decision_dicts(jdecisions: Any) -> list[dict[str, Any]]:
    return [_dict(d) for d in _list(jdecisions)]


def plan_decisions(df: DataFrame) -> list[dict[str, Any]]:
    """Decisions in a DataFrame's optimized plan, without running it."""
    spark = df.sparkSession
    plan = df._jdf.queryExecution().optimizedPlan()  # noqa: SLF001
    return _decision_dicts(_class(spark, "eqdelete.explain.DecisionLog").ofPlanAsJava(plan))


def iceberg_catalog(spark: SparkSession, table: str) -> tuple[Any, Any]:
    """Iceberg's catalog of ``table`` (``<catalog>.<namespace...>.<name>``) and the table's identifier in it."""
    catalog_name, identifier = table.split(".", 1)
    catalog = _class(spark, "org.apache.iceberg.spark.Spark3Util").loadIcebergCatalog(_jsession(spark), catalog_name)
    return catalog, _class(spark, "org.apache.iceberg.catalog.TableIdentifier").parse(identifier)


def current_snapshot_id(spark: SparkSession, table: str) -> int | None:
    """The table's current snapshot id, from Iceberg's catalog (no Spark job)."""
    jtable = _class(spark, "org.apache.iceberg.spark.Spark3Util").loadIcebergTable(_jsession(spark), table)
    snapshot = jtable.currentSnapshot()
    return None if snapshot is None else int(snapshot.snapshotId())


def reset_peak_heap(spark: SparkSession) -> None:
    """Reset the peak-usage counters of the driver JVM's heap pools."""
    for pool in _list(_class(spark, "java.lang.management.ManagementFactory").getMemoryPoolMXBeans()):
        if str(pool.getType().toString()) == "Heap memory":
            pool.resetPeakUsage()


def peak_heap_bytes(spark: SparkSession) -> int:
    """Sum of the heap pools' peak usage since the last reset (driver JVM; in local mode the
    executors run in it too)."""
    total = 0
    for pool in _list(_class(spark, "java.lang.management.ManagementFactory").getMemoryPoolMXBeans()):
        if str(pool.getType().toString()) == "Heap memory":
            total += int(pool.getPeakUsage().getUsed())
    return total


def seconds_to_plan(df: DataFrame) -> float:
    """Seconds the JVM takes to plan ``df`` fully (its scans' files included), without running it."""
    timer = _class(df.sparkSession, "eqdelete.planning.PlanningTime")
    return float(timer.seconds(df._jdf.queryExecution()))  # noqa: SLF001


def forget_kept_deletes(spark: SparkSession) -> None:
    """Drop eqdelete's kept delete planning, so the next query plans its deletes cold."""
    _class(spark, "eqdelete.planning.PlanningTime").forgetKeptDeletes()


def _calling(call: Callable[[], Any]) -> Any:
    """``call()``, with eqdelete's own JVM exceptions raised as their Python errors (one line each),
    not as a Py4JJavaError carrying a JVM stack trace."""
    from py4j.protocol import Py4JJavaError

    try:
        return call()
    except Py4JJavaError as error:
        cause = error.java_exception
        known = from_jvm(str(cause.getClass().getName()), str(cause.getMessage()))
        if known is not None:
            raise known from None
        raise


def stop_round(spark: SparkSession, job_group: str) -> bool:
    """Stop the maintain round running in ``job_group`` (its jobs now, itself at its next step);
    False when none runs there."""
    return bool(_class(spark, "eqdelete.maintain.RoundStop").stop(_jsession(spark).sparkContext(), job_group))


def clear_job_group(spark: SparkSession) -> None:
    """The calling thread's Spark job group (and its description) unset."""
    spark.sparkContext._jsc.clearJobGroup()  # noqa: SLF001


def resolve_equality_deletes(spark: SparkSession, table: str, where: str | None, dry_run: bool) -> dict[str, Any]:
    """Run eqdelete's resolve on the JVM; its result as a dict (see eqdelete.resolve)."""
    resolver = _class(spark, "eqdelete.resolve.ResolveEqualityDeletes")
    return _calling(lambda: _dict(resolver.run(_jsession(spark), table, where, dry_run).asJava()))


def maintain_round(spark: SparkSession, table: str, keep_index: bool) -> dict[str, Any]:
    """Run one round of eqdelete's maintain on the JVM (``keep_index``: keeping the table's live-row
    index for the next round); its result as a dict (see eqdelete.maintain)."""
    rounds = _class(spark, "eqdelete.maintain.MaintainRound")
    return _calling(lambda: _dict(rounds.run(_jsession(spark), table, keep_index).asJava()))


def active_stage_progress(spark: SparkSession) -> list[tuple[int, str, int, int]]:
    """(stage id, name, tasks done, tasks) of every stage running now, from the status tracker."""
    tracker = spark.sparkContext.statusTracker()
    stages = []
    for stage_id in tracker.getActiveStageIds():
        info = tracker.getStageInfo(stage_id)
        if info is not None:
            stages.append((stage_id, info.name, info.numCompletedTasks, info.numTasks))
    return stages


def live_key_store_probe(spark: SparkSession, rows: int, partitions: int, data_files: int, lookups: int,
                         updates: int) -> list[dict[str, int]]:
    """One measurement per store of the live-row key index's storage (eqdelete.liveindex.LiveKeyStoreProbe)."""
    measured = _class(spark, "eqdelete.liveindex.LiveKeyStoreProbe").run(
        _jsession(spark), rows, partitions, data_files, lookups, updates)
    fields = ("entries", "loadNanos", "compactNanos", "bytes", "lookups", "lookupNanos", "found", "updates", "updateNanos",
              "sortedLookupNanos", "sortedFound")
    return [{f: int(getattr(measured.apply(i), f)()) for f in fields} for i in range(measured.size())]


def live_key_store_bulk(spark: SparkSession, rows: int, partitions: int, data_files: int) -> dict[str, int]:
    """The sorted load of an index of the live rows by key (eqdelete.liveindex.LiveKeyIndex), measured and checked."""
    measured = _class(spark, "eqdelete.liveindex.LiveKeyStoreProbe").bulk(_jsession(spark), rows, partitions, data_files)
    return {f: int(getattr(measured, f)()) for f in ("entries", "nanos", "bytes", "asked", "found", "executors")}


def positions_both_ways(spark: SparkSession, table: str) -> tuple[list[str], list[str]]:
    """The positions a resolve of ``table`` would delete, found by today's plan and through the
    live-row index (``file#position``, sorted): for the differential test."""
    both = _class(spark, "eqdelete.liveindex.IndexedDeletedPositions").bothWays(_jsession(spark), table)
    return _strings(spark, both._1()), _strings(spark, both._2())


def kept_index_round(spark: SparkSession, table: str, reading: bool = False) -> tuple[list[str], list[str], int]:
    """A resolve of ``table`` through the kept live-row indexes (eqdelete.liveindex.KeptLiveIndexes),
    or (``reading``) by reading the data files, the held indexes dropped: today's positions, the
    round's (``file#position``, sorted), and the rows it resolved."""
    both = _class(spark, "eqdelete.liveindex.KeptLiveIndexes").roundBothWays(_jsession(spark), table, reading)
    return _strings(spark, both._1()), _strings(spark, both._2()), int(both._3())


def auto_choice(spark: SparkSession, table: str) -> tuple[str, str]:
    """What a round of a long-running maintain of ``table`` would choose now under auto, from
    metadata only: ``("index" | "reading" | "nothing", why)``."""
    kind, why = _list(_class(spark, "eqdelete.liveindex.KeptLiveIndexes").autoChoice(_jsession(spark), table))
    return str(kind), str(why)


def forget_kept_indexes(spark: SparkSession, table: str, checkpoints: bool = False) -> None:
    """Lets go of the kept live-row indexes of ``table`` in this driver, as a restart of maintain
    would: the next round restores the last saved version. With ``checkpoints``, their saved
    versions go too, and the next round builds the index from the table."""
    _class(spark, "eqdelete.liveindex.KeptLiveIndexes").forget(_jsession(spark), table, checkpoints)


def claim_maintain_lease(spark: SparkSession, table: str, holder: str, ttl_seconds: float) -> Optional[str]:
    """Claims or renews ``table`` for the maintain process ``holder`` (MaintainLease): None when it
    holds it now, else who holds it."""
    held = _class(spark, "eqdelete.maintain.MaintainLease").claimed(_jsession(spark), table, holder, int(ttl_seconds))
    return None if held is None else str(held)


def release_maintain_lease(spark: SparkSession, table: str, holder: str) -> None:
    """Lets go of ``table`` if the maintain process ``holder`` holds it."""
    _class(spark, "eqdelete.maintain.MaintainLease").release(_jsession(spark), table, holder)


def kept_store_loads(spark: SparkSession) -> int:
    """How many kept stores this driver's JVM (local mode: every task's) loaded from their checkpoints."""
    jvm = spark.sparkContext._jvm
    return int(jvm.eqdelete.liveindex.LiveKeyStores.loaded()) + int(jvm.eqdelete.rowimages.RowImageStores.loaded())


def lose_kept_index_stores(spark: SparkSession, table: str) -> None:
    """For tests: deletes the executors' copies of ``table``'s kept live-row indexes behind the
    driver's back, as an executor lost with them would: tasks load them from their checkpoints."""
    _class(spark, "eqdelete.liveindex.KeptLiveIndexes").loseStores(_jsession(spark), table)
