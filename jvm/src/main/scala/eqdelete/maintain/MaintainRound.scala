package eqdelete.maintain

import scala.util.control.NonFatal

import eqdelete.cost.LiveIndexSetting
import eqdelete.liveindex.KeptLiveIndexes
import eqdelete.planning.LiveDeleteFiles

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.eqdelete.compat.{EqDeleteConf, IcebergActions, IcebergInternals, IcebergSparkTables, MaintainMetricsSource}
import org.apache.spark.sql.internal.SQLConf

/**
 * One round of keeping a live table resolved (`python -m eqdelete maintain` runs them one after
 * another; `CALL eqdelete.system.maintain` runs one), in three jobs:
 * {{{
 *   ResolveAttempts    resolve the equality deletes live now (one RowDelta validated from the
 *                      snapshot it started from), again from the newest snapshot after a conflict
 *   RoundCompactions   format v2: compact the position delete files rounds leave once a partition
 *                      holds enough; rewrite the data files deletes emptied enough of ([[DataCompaction]])
 *   EqualityDeleteLag  measure the lag
 * }}}
 * and reports the [[RoundResult]] to Spark's metrics system too.
 *
 * A round of a long-running `maintain` finds the rows through the table's kept index of its live
 * rows ([[KeptLiveIndexes]]), so it reads only the data files added or changed since the last
 * round, where that costs less than reading the data files its deletes pair with
 * ([[eqdelete.cost.MaintainRoundPlan]]); a round run once plans as a single resolve does, with no
 * state.
 *
 * A writer's appends and new equality deletes never conflict with a round (they are newer than
 * every delete it resolves); a compaction rewriting the data files it read does, and so does a
 * commit changing a deletion vector it merges into. A round that runs out of attempts commits
 * nothing: the table is as it was, and the next round starts over.
 */
object MaintainRound {

  /** The session's settings of a round; each table's properties may override the compaction ones (`TableSettings`). */
  final case class Settings(maxAttempts: Int, retryWaitMillis: Long, compactPositionDeleteFiles: Long,
      compactDataBytesPerHour: Long = 0, compactDataDeadRatio: Double = 0.3, liveIndex: LiveIndexSetting = LiveIndexSetting.Auto,
      liveIndexStores: Int = 0)

  object Settings {
    def from(conf: SQLConf): Settings = Settings(
      maxAttempts = EqDeleteConf.maintainMaxAttempts(conf).min(Int.MaxValue).toInt,
      retryWaitMillis = EqDeleteConf.maintainRetryWaitMillis(conf),
      compactPositionDeleteFiles = EqDeleteConf.maintainCompactPositionDeleteFiles(conf),
      compactDataBytesPerHour = EqDeleteConf.maintainCompactDataBytesPerHour(conf),
      compactDataDeadRatio = EqDeleteConf.maintainCompactDataDeadRatio(conf),
      liveIndex = LiveIndexSetting.of(conf),
      liveIndexStores = EqDeleteConf.maintainLiveIndexStores(conf).min(Int.MaxValue).toInt)
  }

  /** A round run once: no state kept (`--once`, `CALL`, Spark Connect). */
  def run(session: SparkSession, tableName: String): RoundResult = run(session, tableName, keepIndex = false)

  /** A round; `keepIndex`: one of a long-running `maintain`, which keeps the table's index of its live rows (if the settings allow). */
  def run(session: SparkSession, tableName: String, keepIndex: Boolean): RoundResult =
    run(session, tableName, Settings.from(session.sessionState.conf), keepIndex)

  def run(session: SparkSession, tableName: String, settings: Settings, keepIndex: Boolean): RoundResult =
    run(session, tableName, settings, keepIndex, _ => ())

  /**
   * `beforeCommit(attempt)` runs between an attempt's writing and its commit (tests put a
   * concurrent commit there).
   */
  private[maintain] def run(session: SparkSession, tableName: String, settings: Settings, keepIndex: Boolean,
      beforeCommit: Int => Unit): RoundResult = {
    val metrics = MaintainMetricsSource.of(session.sparkContext)
    val timing = metrics.roundTime.time()
    val keep = keepIndex && settings.liveIndex != LiveIndexSetting.Never
    val result = try asActive(session)(RoundStop.around(session.sparkContext) { stop =>
      if (keep) KeptLiveIndexes.exclusively(tableName)(runRound(session, tableName, settings, keep, beforeCommit, stop))
      else runRound(session, tableName, settings, keep, beforeCommit, stop)
    }) catch {
      case e: Throwable =>
        metrics.rounds.inc()
        metrics.roundsFailed.inc()
        throw e
    } finally timing.stop()
    report(metrics, result, keep)
    result
  }

  /**
   * `body` with `session` the calling thread's active session, and of the threads it starts: a
   * round may run on a thread that has none (a service's worker thread), where Spark's `SQLConf.get`
   * falls back to an empty configuration, and a library the round calls reads its session's
   * settings so (Iceberg's `rewrite_data_files` registers the catalog it writes through on the
   * active session, then looks it up by `SQLConf.get`: `CATALOG_NOT_FOUND` without one).
   */
  private def asActive[A](session: SparkSession)(body: => A): A = {
    val previous = SparkSession.getActiveSession
    SparkSession.setActiveSession(session)
    try body finally previous match {
      case Some(p) => SparkSession.setActiveSession(p)
      case None => SparkSession.clearActiveSession()
    }
  }

  private def runRound(session: SparkSession, tableName: String, settings: Settings, keep: Boolean,
      beforeCommit: Int => Unit, stop: RoundStop): RoundResult = {
    val started = System.nanoTime()
    // Current metadata before its properties are read: a property fixed (or broken) since the last round counts now.
    val before = IcebergSparkTables.current(session, tableName)
    val tableSettings = TableSettings.of(before, settings)
    val startingSnapshotId = Option(before.currentSnapshot()).map(_.snapshotId()).getOrElse(-1L)
    val liveBefore = Option(before.currentSnapshot()).map(s => LiveDeleteFiles.equalityDeletes(before, s.snapshotId()).size).getOrElse(0)
    val next = NextRound.of(tableSettings, IcebergInternals.formatVersion(before), liveBefore, positionDeleteFilesPerDataFile = 0)
    if (keep) KeptLiveIndexes.beginRound(tableName)
    // Each step runs unless the round was stopped; a stop inside one ends it there, with what
    // committed before it kept (a commit being sent is never stopped: see RoundStop).
    var stoppedAt: Option[String] = None
    def unlessStopped[A](step: String, none: => A)(body: => A): A =
      if (stoppedAt.isDefined) none
      else try { stop.at(step); body } catch {
        case stopped: RoundStoppedException => stoppedAt = Some(stopped.step); none
        case NonFatal(_) if stop.explainsFailure => stoppedAt = Some(stop.step); none  // its jobs cancelled
      }
    val resolve = unlessStopped("resolve", ResolveAttempts.none(startingSnapshotId)) {
      if (next.deferred.isDefined) ResolveAttempts.none(startingSnapshotId)
      else ResolveAttempts.run(session, tableName, settings, keep, startingSnapshotId, beforeCommit, stop)
    }

    val table = IcebergSparkTables.current(session, tableName)
    val compaction = unlessStopped("compacting the position delete files", RoundCompactions.Maintenance.none[PositionDeleteCompaction.Rewritten]) {
      if (IcebergInternals.formatVersion(table) == 2) RoundCompactions.positionDeletes(session, table, tableSettings)
      else RoundCompactions.Maintenance.none[PositionDeleteCompaction.Rewritten]
    }
    table.refresh()
    val (dataCompaction, overBudget) = unlessStopped("compacting the data files past the dead-row share",
        (RoundCompactions.Maintenance.none[IcebergActions.RewrittenData], Option.empty[String])) {
      RoundCompactions.data(session, table, tableSettings)
    }
    table.refresh()
    val (live, lag) = EqualityDeleteLag.of(table, System.currentTimeMillis())
    // Its size is a Spark job per index: not run once stopped.
    val index = if (keep) unlessStopped("measuring the kept index", Option.empty[KeptLiveIndexes.State])(KeptLiveIndexes.state(session, tableName))
      else None
    val compactionConflicts = compaction.conflict.toSeq ++ dataCompaction.conflict
    val r = resolve.resolved
    RoundResult(
      table = table.name(),
      startingSnapshotId = r.map(_.startingSnapshotId).getOrElse(resolve.lastStart),
      snapshotId = r.flatMap(_.snapshotId),
      attempts = resolve.attempts,
      conflicts = resolve.conflicts.size,
      compactionConflicted = compactionConflicts.nonEmpty,
      lastConflict = (resolve.conflicts ++ compactionConflicts).lastOption,
      equalityDeleteFilesRemoved = r.map(_.equalityDeleteFilesRemoved).getOrElse(0),
      rowsResolved = r.map(_.rowsResolved).getOrElse(0L),
      dataFilesRead = r.map(_.dataFilesRead).getOrElse(0),
      positionDeleteFilesWritten = r.map(_.positionDeleteFilesWritten).getOrElse(0),
      deletionVectorsWritten = r.map(_.deletionVectorsWritten).getOrElse(0),
      positionDeleteFilesCompacted = compaction.done.map(_.rewritten).getOrElse(0),
      compactionFilesWritten = compaction.done.map(_.added).getOrElse(0),
      equalityDeleteFilesLive = live,
      lagSeconds = lag,
      seconds = (System.nanoTime() - started) / 1e9,
      commitNote = (r.flatMap(_.commitNote).toSeq ++ compaction.note ++ dataCompaction.note).reduceOption(_ + "; " + _),
      deferred = (next.deferred.toSeq ++ overBudget).reduceOption(_ + "; " + _),
      dataFilesCompacted = dataCompaction.done.map(_.rewritten).getOrElse(0),
      dataFilesWritten = dataCompaction.done.map(_.added).getOrElse(0),
      dataBytesRewritten = dataCompaction.done.map(_.rewrittenBytes).getOrElse(0L),
      liveIndexEntries = index.map(_.entries).getOrElse(0L),
      liveIndexBytes = index.map(_.bytes).getOrElse(0L),
      liveIndexNote = resolve.lostIndex.orElse(index.flatMap(_.note)),
      liveIndexCheckpointBytes = index.map(_.checkpointBytes).getOrElse(0L),
      liveIndexStoredBytes = index.map(_.storedBytes).getOrElse(0L),
      stoppedAt = stoppedAt)
  }

  /** What the round did, to Spark's metrics system. */
  private def report(metrics: MaintainMetricsSource, result: RoundResult, keep: Boolean): Unit = {
    metrics.rounds.inc()
    if (result.snapshotId.isDefined) metrics.roundsCommitted.inc()
    metrics.conflicts.inc(result.conflicts + (if (result.compactionConflicted) 1 else 0))
    metrics.rowsResolved.inc(result.rowsResolved)
    metrics.equalityDeleteFilesRemoved.inc(result.equalityDeleteFilesRemoved)
    metrics.positionDeleteFilesWritten.inc(result.positionDeleteFilesWritten)
    metrics.deletionVectorsWritten.inc(result.deletionVectorsWritten)
    metrics.positionDeleteFilesCompacted.inc(result.positionDeleteFilesCompacted)
    metrics.dataFilesCompacted.inc(result.dataFilesCompacted)
    metrics.dataBytesRewritten.inc(result.dataBytesRewritten)
    metrics.lag(result.table, result.lagSeconds)
    if (keep) metrics.liveIndex(result.table, result.liveIndexEntries, result.liveIndexBytes)
  }
}
