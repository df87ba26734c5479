package eqdelete.maintain

import scala.jdk.CollectionConverters._

import eqdelete.commit.{CommitOutcome, Failures, GuardedCommit}
import eqdelete.planning.LiveDeleteFiles
import eqdelete.resolve.ResolveEqualityDeletes
import eqdelete.resolve.ResolveEqualityDeletes.ResolveConflictException

import org.apache.spark.internal.Logging
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.eqdelete.compat.{EqDeleteConf, IcebergActions, IcebergInternals, IcebergSparkTables}
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.types.{BooleanType, DataType, DoubleType, IntegerType, LongType, StringType}

/**
 * One round of keeping a live table resolved (`python -m eqdelete maintain` runs them one after
 * another; `CALL eqdelete.system.maintain` runs one): resolve the equality deletes live now
 * ([[ResolveEqualityDeletes]], one `RowDelta` validated from the snapshot it started from),
 * starting again from the newest snapshot after a conflicting commit, with a doubling wait; then,
 * on format v2, compact the position delete files that rounds leave once a partition holds
 * enough; then measure the lag.
 *
 * A writer's appends and new equality deletes never conflict with a round (they are newer than
 * every delete it resolves); a compaction rewriting the data files it read does, and so does a
 * commit changing a deletion vector it merges into. A round that runs out of attempts commits
 * nothing: the table is as it was, and the next round starts over.
 */
object MaintainRound extends Logging {

  final case class Settings(maxAttempts: Int, retryWaitMillis: Long, compactPositionDeleteFiles: Long)

  object Settings {
    def from(conf: SQLConf): Settings = Settings(
      maxAttempts = EqDeleteConf.maintainMaxAttempts(conf).min(Int.MaxValue).toInt,
      retryWaitMillis = EqDeleteConf.maintainRetryWaitMillis(conf),
      compactPositionDeleteFiles = EqDeleteConf.maintainCompactPositionDeleteFiles(conf))
  }

  /**
   * What a round did.
   *
   * @param startingSnapshotId the snapshot its last resolve attempt started from
   * @param snapshotId         the resolve's commit; None when nothing was committed (nothing to
   *                           resolve, or every attempt conflicted)
   * @param conflicts          resolve attempts whose commit conflicted with a concurrent one (all of
   *                           them when `conflicts == attempts`: nothing committed)
   * @param compactionConflicted the compaction's commit conflicted (it is left to the next round)
   * @param lastConflict       the last conflict's message
   * @param equalityDeleteFilesLive equality delete files live after the round (newer ones the
   *                           writer committed while it ran, or all of them if it could not commit)
   * @param lagSeconds         after the round, the age of the oldest live equality delete: how
   *                           long ago the commit that added it was made (0 when none is live)
   * @param commitNote         what the client saw of a commit that landed although its answer was
   *                           lost, or of a compaction whose outcome is unknown; None when neither
   * @param deferred           why the round left live equality deletes to a later one (fewer files
   *                           than the table's `eqdelete.maintain.min-equality-delete-files`)
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
      deferred: Option[String] = None) {

    def values: Seq[Any] = Seq(table, startingSnapshotId, snapshotId.map(Long.box).orNull, attempts, conflicts,
      compactionConflicted, lastConflict.orNull, equalityDeleteFilesRemoved, rowsResolved, dataFilesRead, positionDeleteFilesWritten,
      deletionVectorsWritten, positionDeleteFilesCompacted, compactionFilesWritten, equalityDeleteFilesLive, lagSeconds, seconds,
      commitNote.orNull, deferred.orNull)

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
      "seconds" -> DoubleType, "commit_note" -> StringType, "deferred" -> StringType)
    val Nullable: Set[String] = Set("snapshot_id", "last_conflict", "commit_note", "deferred")
  }

  /** The longest wait between two attempts. */
  private val MaxWaitMillis = 60000L

  def run(session: SparkSession, tableName: String): Result = run(session, tableName, Settings.from(session.sessionState.conf))

  def run(session: SparkSession, tableName: String, settings: Settings): Result = run(session, tableName, settings, _ => ())

  /** `beforeCommit(attempt)` runs between an attempt's writing and its commit (tests put a concurrent commit there). */
  private[maintain] def run(session: SparkSession, tableName: String, settings: Settings, beforeCommit: Int => Unit): Result = {
    val started = System.nanoTime()
    val before = IcebergSparkTables.load(session, tableName)
    val tableSettings = TableSettings.of(before, settings.compactPositionDeleteFiles)
    val liveBefore = Option(before.currentSnapshot()).map(s => LiveDeleteFiles.equalityDeletes(before, s.snapshotId()).size).getOrElse(0)
    val next = NextRound.of(tableSettings, IcebergInternals.formatVersion(before), liveBefore, positionDeleteFilesPerDataFile = 0)
    val conflicts = Vector.newBuilder[String]
    var attempt = 0
    var resolved: Option[ResolveEqualityDeletes.Result] = None
    var lastStart = Option(before.currentSnapshot()).map(_.snapshotId()).getOrElse(-1L)
    while (resolved.isEmpty && attempt < settings.maxAttempts && next.deferred.isEmpty) {
      if (attempt > 0) Thread.sleep(math.min(MaxWaitMillis, settings.retryWaitMillis << math.min(attempt - 1, 16)))
      attempt += 1
      try {
        val prepared = ResolveEqualityDeletes.prepare(session, tableName, null)
        beforeCommit(attempt)
        resolved = Some(prepared.commit())
      } catch {
        case conflict: ResolveConflictException =>
          logWarning(s"eqdelete maintain: attempt $attempt of ${settings.maxAttempts} on $tableName conflicted: ${conflict.getMessage}")
          lastStart = conflict.startingSnapshotId
          conflicts += conflict.getMessage
      }
    }
    val table = IcebergSparkTables.load(session, tableName)
    table.refresh()
    val (compaction, compactionConflict, compactionNote) =
      if (IcebergInternals.formatVersion(table) == 2) compact(session, table, tableSettings) else (None, None, None)
    table.refresh()
    val (live, lag) = EqualityDeleteLag.of(table, System.currentTimeMillis())
    val resolveConflicts = conflicts.result()
    val all = resolveConflicts ++ compactionConflict
    val r = resolved
    Result(
      table = table.name(),
      startingSnapshotId = r.map(_.startingSnapshotId).getOrElse(lastStart),
      snapshotId = r.flatMap(_.snapshotId),
      attempts = attempt,
      conflicts = resolveConflicts.size,
      compactionConflicted = compactionConflict.nonEmpty,
      lastConflict = all.lastOption,
      equalityDeleteFilesRemoved = r.map(_.equalityDeleteFilesRemoved).getOrElse(0),
      rowsResolved = r.map(_.rowsResolved).getOrElse(0L),
      dataFilesRead = r.map(_.dataFilesRead).getOrElse(0),
      positionDeleteFilesWritten = r.map(_.positionDeleteFilesWritten).getOrElse(0),
      deletionVectorsWritten = r.map(_.deletionVectorsWritten).getOrElse(0),
      positionDeleteFilesCompacted = compaction.map(_.rewritten).getOrElse(0),
      compactionFilesWritten = compaction.map(_.added).getOrElse(0),
      equalityDeleteFilesLive = live,
      lagSeconds = lag,
      seconds = (System.nanoTime() - started) / 1e9,
      commitNote = (r.flatMap(_.commitNote).toSeq ++ compactionNote).reduceOption(_ + "; " + _),
      deferred = next.deferred)
  }

  /**
   * Rewrites the position delete files once a reader of some data file would open at least the
   * setting's number of them: what it did, the conflict that left it to the next round, and what
   * the client saw if the commit landed all the same. A commit whose outcome cannot be told is
   * reported as such, its files kept (Iceberg deletes a rewrite's files only on a known failure).
   */
  private def compact(session: SparkSession, table: org.apache.iceberg.Table,
      settings: TableSettings): (Option[IcebergActions.RewrittenDeletes], Option[String], Option[String]) = {
    val threshold = settings.compactPositionDeleteFiles
    val due = threshold > 0 && Option(table.currentSnapshot()).exists { s =>
      NextRound.compacts(settings, formatVersion = 2, PositionDeletePileUp.mostFilesPerDataFile(table, s.snapshotId()))
    }
    if (!due) (None, None, None)
    else {
      var rewritten: Option[IcebergActions.RewrittenDeletes] = None
      val marker = CompactionKey -> java.util.UUID.randomUUID().toString
      GuardedCommit.run(table, marker) { guarded =>
        rewritten = Some(IcebergActions.rewritePositionDeletes(session, guarded, threshold, marker))
      } match {
        case CommitOutcome.Committed(snapshot, recovered) =>
          val done = rewritten.getOrElse(fromSummary(table, snapshot))
          (Some(done), None, recovered.map(why => s"the compaction's answer was lost ($why); its snapshot $snapshot was found in the table"))
        case CommitOutcome.NothingToCommit => (rewritten, None, None)
        case CommitOutcome.NotCommitted(e) if Failures.isConflict(e) =>
          val message = s"eqdelete: compacting the position delete files of ${table.name()} conflicts with a concurrent commit: ${Failures.describe(e)}"
          logWarning(message)
          (None, Some(message), None)
        case CommitOutcome.NotCommitted(e) => throw e
        case CommitOutcome.Unknown(e, why) =>
          val message = s"the compaction's commit has an unknown outcome (${Failures.describe(e)}; $why): nothing was deleted, the next round sees"
          logWarning(s"eqdelete: ${table.name()}: $message")
          (None, None, Some(message))
      }
    }
  }

  /** What a rewrite committed as `snapshotId` did, from its summary (when its own answer was lost). */
  private def fromSummary(table: org.apache.iceberg.Table, snapshotId: Long): IcebergActions.RewrittenDeletes = {
    val summary = Option(table.snapshot(snapshotId)).map(_.summary().asScala.toMap).getOrElse(Map.empty[String, String])
    def count(key: String) = summary.get(key).map(_.toInt).getOrElse(0)
    IcebergActions.RewrittenDeletes(count("removed-position-delete-files"), count("added-position-delete-files"))
  }

  /** The snapshot summary property marking a compaction's commit. */
  val CompactionKey = "eqdelete.compaction-id"
}
