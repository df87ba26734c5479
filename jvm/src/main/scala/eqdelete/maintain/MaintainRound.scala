package eqdelete.maintain

import scala.jdk.CollectionConverters._

import eqdelete.commit.{CommitOutcome, Failures, GuardedCommit}
import eqdelete.cost.LiveIndexSetting
import eqdelete.liveindex.LiveKeyStoreLostException
import eqdelete.planning.LiveDeleteFiles
import eqdelete.resolve.{KeptLiveIndexes, ResolveEqualityDeletes}
import eqdelete.resolve.ResolveEqualityDeletes.{ResolveConflictException, ResolveFailedException}

import org.apache.spark.internal.Logging
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.eqdelete.compat.{EqDeleteConf, IcebergActions, IcebergInternals, IcebergSparkTables, MaintainMetricsSource}
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.types.{BooleanType, DataType, DoubleType, IntegerType, LongType, StringType}

/**
 * One round of keeping a live table resolved (`python -m eqdelete maintain` runs them one after
 * another; `CALL eqdelete.system.maintain` runs one): resolve the equality deletes live now
 * ([[ResolveEqualityDeletes]], one `RowDelta` validated from the snapshot it started from),
 * starting again from the newest snapshot after a conflicting commit, with a doubling wait; then,
 * on format v2, compact the position delete files that rounds leave once a partition holds
 * enough; rewrite the data files deletes have emptied enough of, within a byte budget
 * ([[DataCompaction]], off unless set); then measure the lag.
 *
 * A round of a long-running `maintain` finds the rows through the table's kept index of its live
 * rows ([[KeptLiveIndexes]]), so it reads only the data files added or changed since the last
 * round, where that costs less than reading the data files its deletes pair with
 * ([[eqdelete.cost.MaintainRoundPlan]]); a round run once plans as a single resolve does, with no
 * state. When a store of the index was lost with its executor, the round falls back to that plan
 * and the index is built again next round.
 *
 * A writer's appends and new equality deletes never conflict with a round (they are newer than
 * every delete it resolves); a compaction rewriting the data files it read does, and so does a
 * commit changing a deletion vector it merges into. A round that runs out of attempts commits
 * nothing: the table is as it was, and the next round starts over.
 */
object MaintainRound extends Logging {

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

  /**
   * What a round did.
   *
   * @param startingSnapshotId the snapshot its last resolve attempt started from
   * @param snapshotId         the resolve's commit; None when nothing was committed (nothing to
   *                           resolve, or every attempt conflicted)
   * @param conflicts          resolve attempts whose commit conflicted with a concurrent one (all of
   *                           them when `conflicts == attempts`: nothing committed)
   * @param compactionConflicted a compaction's commit (position delete files, or data files)
   *                           conflicted (it is left to the next round)
   * @param lastConflict       the last conflict's message
   * @param equalityDeleteFilesLive equality delete files live after the round (newer ones the
   *                           writer committed while it ran, or all of them if it could not commit)
   * @param lagSeconds         after the round, the age of the oldest live equality delete: how
   *                           long ago the commit that added it was made (0 when none is live)
   * @param commitNote         what the client saw of a commit that landed although its answer was
   *                           lost, or of a compaction whose outcome is unknown; None when neither
   * @param deferred           what the round left to a later one and why: live equality deletes
   *                           (fewer files than the table's `eqdelete.maintain.min-equality-delete-files`),
   *                           data files due for compaction past the hour's byte budget
   * @param dataFilesCompacted data files rewritten because deletes removed enough of their rows
   *                           ([[DataCompaction]]), into `dataFilesWritten` files; `dataBytesRewritten` their bytes
   * @param liveIndexEntries   entries of the table's kept index of its live rows after the round
   *                           (0 without one), `liveIndexBytes` the bytes its stores hold
   * @param liveIndexNote      how the round came by its kept index when not by bringing it forward:
   *                           built from the table (why), or a store lost and the plan without it used
   */
  final case class Result(
      table: String,
      startingSnapshotId: Long,
      snapshotId: Option[Long],
      attempts: Int,
      conflicts: Int,
      compactionConflicted: Boolean,
      lastConflict: Option[String],
      equalityDeleteFilesRemoved: Int,
      rowsResolved: Long,
      dataFilesRead: Int,
      positionDeleteFilesWritten: Int,
      deletionVectorsWritten: Int,
      positionDeleteFilesCompacted: Int,
      compactionFilesWritten: Int,
      equalityDeleteFilesLive: Int,
      lagSeconds: Double,
      seconds: Double,
      commitNote: Option[String] = None,
      deferred: Option[String] = None,
      dataFilesCompacted: Int = 0,
      dataFilesWritten: Int = 0,
      dataBytesRewritten: Long = 0,
      liveIndexEntries: Long = 0,
      liveIndexBytes: Long = 0,
      liveIndexNote: Option[String] = None) {

    def values: Seq[Any] = Seq(table, startingSnapshotId, snapshotId.map(Long.box).orNull, attempts, conflicts,
      compactionConflicted, lastConflict.orNull, equalityDeleteFilesRemoved, rowsResolved, dataFilesRead, positionDeleteFilesWritten,
      deletionVectorsWritten, positionDeleteFilesCompacted, compactionFilesWritten, equalityDeleteFilesLive, lagSeconds, seconds,
      commitNote.orNull, deferred.orNull, dataFilesCompacted, dataFilesWritten, dataBytesRewritten, liveIndexEntries,
      liveIndexBytes, liveIndexNote.orNull)

    /** Field name to value, for Python and the SQL procedure's row. */
    def asJava: java.util.Map[String, Any] = Result.Fields.map(_._1).zip(values).toMap.asJava
  }

  object Result {
    /** The one schema of a round's result; Python's `MaintainRound` has the same fields (a test checks both). */
    val Fields: Seq[(String, DataType)] = Seq(
      "table" -> StringType, "starting_snapshot_id" -> LongType, "snapshot_id" -> LongType, "attempts" -> IntegerType,
      "conflicts" -> IntegerType, "compaction_conflicted" -> BooleanType, "last_conflict" -> StringType, "equality_delete_files_removed" -> IntegerType,
      "rows_resolved" -> LongType, "data_files_read" -> IntegerType, "position_delete_files_written" -> IntegerType,
      "deletion_vectors_written" -> IntegerType, "position_delete_files_compacted" -> IntegerType,
      "compaction_files_written" -> IntegerType, "equality_delete_files_live" -> IntegerType, "lag_seconds" -> DoubleType,
      "seconds" -> DoubleType, "commit_note" -> StringType, "deferred" -> StringType,
      "data_files_compacted" -> IntegerType, "data_files_written" -> IntegerType, "data_bytes_rewritten" -> LongType,
      "live_index_entries" -> LongType, "live_index_bytes" -> LongType, "live_index_note" -> StringType)
    val Nullable: Set[String] = Set("snapshot_id", "last_conflict", "commit_note", "deferred", "live_index_note")
  }

  /** The longest wait between two attempts. */
  private val MaxWaitMillis = 60000L

  /** A round run once: no state kept (`--once`, `CALL`, Spark Connect). */
  def run(session: SparkSession, tableName: String): Result = run(session, tableName, keepIndex = false)

  /** A round; `keepIndex`: one of a long-running `maintain`, which keeps the table's index of its live rows (if the settings allow). */
  def run(session: SparkSession, tableName: String, keepIndex: Boolean): Result =
    run(session, tableName, Settings.from(session.sessionState.conf), keepIndex)

  def run(session: SparkSession, tableName: String, settings: Settings, keepIndex: Boolean): Result =
    run(session, tableName, settings, keepIndex, _ => ())

  /**
   * `beforeCommit(attempt)` runs between an attempt's writing and its commit (tests put a
   * concurrent commit there). What the round did goes to Spark's metrics system too.
   */
  private[maintain] def run(session: SparkSession, tableName: String, settings: Settings, keepIndex: Boolean,
      beforeCommit: Int => Unit): Result = {
    val metrics = MaintainMetricsSource.of(session.sparkContext)
    val timing = metrics.roundTime.time()
    val keep = keepIndex && settings.liveIndex != LiveIndexSetting.Never
    val result = try {
      if (keep) KeptLiveIndexes.exclusively(tableName)(runRound(session, tableName, settings, keep, beforeCommit))
      else runRound(session, tableName, settings, keep, beforeCommit)
    } catch {
      case e: Throwable =>
        metrics.rounds.inc()
        metrics.roundsFailed.inc()
        throw e
    } finally timing.stop()
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
    result
  }

  private def runRound(session: SparkSession, tableName: String, settings: Settings, keep: Boolean,
      beforeCommit: Int => Unit): Result = {
    val started = System.nanoTime()
    val before = IcebergSparkTables.load(session, tableName)
    val tableSettings = TableSettings.of(before, settings)
    val liveBefore = Option(before.currentSnapshot()).map(s => LiveDeleteFiles.equalityDeletes(before, s.snapshotId()).size).getOrElse(0)
    val next = NextRound.of(tableSettings, IcebergInternals.formatVersion(before), liveBefore, positionDeleteFilesPerDataFile = 0)
    val conflicts = Vector.newBuilder[String]
    var attempt = 0
    var resolved: Option[ResolveEqualityDeletes.Result] = None
    var lastStart = Option(before.currentSnapshot()).map(_.snapshotId()).getOrElse(-1L)
    val stores = if (settings.liveIndexStores > 0) settings.liveIndexStores else session.sparkContext.defaultParallelism
    var lost: Option[String] = None
    if (keep) KeptLiveIndexes.beginRound(tableName)
    def attemptWith(index: Boolean): ResolveEqualityDeletes.Result = {
      val prepared =
        if (index) KeptLiveIndexes.prepare(session, tableName, stores, settings.liveIndex) else ResolveEqualityDeletes.prepare(session, tableName, null)
      try beforeCommit(attempt) catch { case e: Throwable => prepared.abandon(); throw e }
      prepared.commit()
    }
    while (resolved.isEmpty && attempt < settings.maxAttempts && next.deferred.isEmpty) {
      if (attempt > 0) Thread.sleep(math.min(MaxWaitMillis, settings.retryWaitMillis << math.min(attempt - 1, 16)))
      attempt += 1
      try {
        resolved = Some(try attemptWith(keep && lost.isEmpty) catch {
          // The index is a cache of the table: without it the round plans as a single resolve does.
          case failed: ResolveFailedException if keep && Failures.causes(failed).exists(_.isInstanceOf[LiveKeyStoreLostException]) =>
            lost = Some(s"a store of the kept index was lost with its executor (${Failures.describe(failed)}); this round " +
              "found the rows without it, and the index is built again next round")
            logWarning(s"eqdelete maintain: $tableName: ${lost.get}")
            attemptWith(index = false)
        })
      } catch {
        case conflict: ResolveConflictException =>
          logWarning(s"eqdelete maintain: attempt $attempt of ${settings.maxAttempts} on $tableName conflicted: ${conflict.getMessage}")
          lastStart = conflict.startingSnapshotId
          conflicts += conflict.getMessage
      }
    }
    val table = IcebergSparkTables.load(session, tableName)
    table.refresh()
    val compaction =
      if (IcebergInternals.formatVersion(table) == 2) compact(session, table, tableSettings) else Maintenance.none[PositionDeleteCompaction.Rewritten]
    table.refresh()
    val (dataCompaction, overBudget) = compactData(session, table, tableSettings)
    table.refresh()
    val (live, lag) = EqualityDeleteLag.of(table, System.currentTimeMillis())
    val index = if (keep) KeptLiveIndexes.state(session, tableName) else None
    val resolveConflicts = conflicts.result()
    val compactionConflicts = compaction.conflict.toSeq ++ dataCompaction.conflict
    val all = resolveConflicts ++ compactionConflicts
    val r = resolved
    Result(
      table = table.name(),
      startingSnapshotId = r.map(_.startingSnapshotId).getOrElse(lastStart),
      snapshotId = r.flatMap(_.snapshotId),
      attempts = attempt,
      conflicts = resolveConflicts.size,
      compactionConflicted = compactionConflicts.nonEmpty,
      lastConflict = all.lastOption,
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
      liveIndexNote = lost.orElse(index.flatMap(_.note)))
  }

  /**
   * Rewrites the position delete files once a reader of some data file would open at least the
   * setting's number of them: what it did, the conflict that left it to the next round, and what
   * the client saw if the commit landed all the same.
   */
  private def compact(session: SparkSession, table: org.apache.iceberg.Table,
      settings: TableSettings): Maintenance[PositionDeleteCompaction.Rewritten] = {
    val threshold = settings.compactPositionDeleteFiles
    val due = threshold > 0 && Option(table.currentSnapshot()).exists { s =>
      NextRound.compacts(settings, formatVersion = 2, PositionDeletePileUp.mostFilesPerDataFile(table, s.snapshotId()))
    }
    if (!due) Maintenance.none
    else PositionDeleteCompaction.prepare(session, table, threshold) match {
      case None => Maintenance.none
      case Some(prepared) =>
        guarded(table, CompactionKey, "compacting the position delete files", "the compaction", prepared.discard) { summary =>
          PositionDeleteCompaction.Rewritten(summary("removed-position-delete-files").toInt, summary("added-position-delete-files").toInt)
        } { (guardedTable, marker) => prepared.commit(guardedTable, marker) }
    }
  }

  /** Rewrites the data files past the dead-row share, within the hour's budget ([[DataCompaction]]). */
  private def compactData(session: SparkSession, table: org.apache.iceberg.Table,
      settings: TableSettings): (Maintenance[IcebergActions.RewrittenData], Option[String]) =
    DataCompaction.plan(table, settings, System.currentTimeMillis()) match {
      case DataCompaction.Plan.Rewrite(_, maxFiles) =>
        val done = guarded(table, DataCompaction.Key, "rewriting the data files past the dead-row share", "the data compaction") {
          summary => IcebergActions.RewrittenData(summary("deleted-data-files").toInt, summary("added-data-files").toInt,
            summary("removed-files-size"))
        } { (guardedTable, marker) =>
          IcebergActions.rewriteDeadData(session, guardedTable, settings.compactDataDeadRatio, maxFiles, marker)
        }
        (done, None)
      case over: DataCompaction.Plan.OverBudget => (Maintenance.none, Some(s"data compaction: ${over.describe}"))
      case _ => (Maintenance.none, None)
    }

  /** What a maintenance commit did, the conflict that left it to the next round, and what the client saw of a lost answer. */
  private final case class Maintenance[A](done: Option[A], conflict: Option[String], note: Option[String])
  private object Maintenance { def none[A]: Maintenance[A] = Maintenance[A](None, None, None) }

  /**
   * Runs one of maintain's own rewrites as a guarded commit marked with `key`. A commit whose
   * answer was lost is read back from its snapshot's summary (`fromSummary`, absent counts as 0);
   * one whose outcome cannot be told is reported as such, its files kept. The files a rewrite
   * wrote before its commit are deleted by `discard` only on a known failure (Iceberg's actions
   * delete their own then).
   */
  private def guarded[A](table: org.apache.iceberg.Table, key: String, doing: String, what: String,
      discard: () => Unit = () => ())(
      fromSummary: (String => Long) => A)(rewrite: (org.apache.iceberg.Table, (String, String)) => A): Maintenance[A] = {
    var done: Option[A] = None
    val marker = key -> java.util.UUID.randomUUID().toString
    GuardedCommit.run(table, marker) { guardedTable => done = Some(rewrite(guardedTable, marker)) } match {
      case CommitOutcome.Committed(snapshot, recovered) =>
        val summary = Option(table.snapshot(snapshot)).map(_.summary().asScala.toMap).getOrElse(Map.empty[String, String])
        Maintenance(Some(done.getOrElse(fromSummary(k => summary.get(k).map(_.toLong).getOrElse(0L)))), None,
          recovered.map(why => s"$what's answer was lost ($why); its snapshot $snapshot was found in the table"))
      case CommitOutcome.NothingToCommit => Maintenance(done, None, None)
      case CommitOutcome.NotCommitted(e) if Failures.isConflict(e) =>
        discard()
        val message = s"eqdelete: $doing of ${table.name()} conflicts with a concurrent commit: ${Failures.describe(e)}"
        logWarning(message)
        Maintenance(None, Some(message), None)
      case CommitOutcome.NotCommitted(e) =>
        discard()
        throw e
      case CommitOutcome.Unknown(e, why) =>
        val message = s"$what's commit has an unknown outcome (${Failures.describe(e)}; $why): nothing was deleted, the next round sees"
        logWarning(s"eqdelete: ${table.name()}: $message")
        Maintenance(None, None, Some(message))
    }
  }

  /** The snapshot summary property marking a compaction's commit. */
  val CompactionKey = "eqdelete.compaction-id"
}
