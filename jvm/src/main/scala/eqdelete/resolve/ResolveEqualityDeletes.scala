package eqdelete.resolve

import scala.jdk.CollectionConverters._
import scala.util.Try
import scala.util.control.NonFatal

import eqdelete.commit.{CommitOutcome, CommitOutcomeUnknownException, Failures, GuardedCommit}
import eqdelete.explain.JobDescription
import eqdelete.planning.ScanDeletes

import org.apache.iceberg.{DeleteFile, FileContent, Table}
import org.apache.spark.internal.Logging
import org.apache.spark.sql.{DataFrame, SparkSession}
import org.apache.spark.sql.catalyst.analysis.EliminateSubqueryAliases
import org.apache.spark.sql.catalyst.expressions.PredicateHelper
import org.apache.spark.sql.catalyst.plans.logical.Filter
import org.apache.spark.sql.eqdelete.compat.{IcebergInternals, IcebergSparkTables, SupportedVersions}
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation
import org.apache.spark.sql.types.{BooleanType, DataType, DoubleType, IntegerType, LongType, StringType}

/**
 * Resolves a table's equality deletes once, so every reader gets fast: each live row an
 * equality delete removes becomes a position delete (format v2) or a bit in its data file's
 * deletion vector (v3), and the equality delete files so resolved are removed, in one
 * `RowDelta` validated from the starting snapshot. See [[ResolveWork]] for which files are
 * removed, [[DeletedPositions]] for how the rows are found, [[PositionDeleteWriting]] for the
 * files written.
 *
 * A concurrent commit that removes or rewrites a data file the resolve writes deletes for, adds
 * a deletion vector to one, or removes an equality delete file it removes, fails the commit;
 * the files written are then deleted and the table is as it was. Concurrent appends and new
 * equality deletes do not conflict (they are newer than every delete resolved). A delete file
 * that cannot be read fails the run before anything is written.
 *
 * A failed answer is not taken for a failed commit ([[GuardedCommit]]): a commit whose answer was
 * lost, or that was sent again and refused because it had already moved the table, is found in
 * the table and reported as committed; one whose outcome the table cannot show keeps every file
 * it wrote and fails with [[CommitOutcomeUnknownException]].
 */
object ResolveEqualityDeletes extends PredicateHelper with Logging {

  /**
   * What a run did (or, with `dryRun`, would do).
   *
   * @param snapshotId    the snapshot committed; None when nothing was (a dry run, or nothing to resolve)
   * @param dataFilesRead the data files whose key columns were read to find the rows: those Iceberg's
   *                      planning pairs with an equality delete (partition, sequence numbers, key bounds);
   *                      through a kept index of the live rows ([[eqdelete.liveindex.KeptLiveIndex]]), those it read to
   *                      come up to date: added or changed since its last round, all when built
   * @param commitNote    when the client saw the commit fail although it landed (a lost answer, a 409 to
   *                      a commit sent again), what it saw; None otherwise
   */
  final case class Result(
      table: String,
      startingSnapshotId: Long,
      snapshotId: Option[Long],
      formatVersion: Int,
      equalityDeleteFilesRemoved: Int,
      equalityDeleteFilesKept: Int,
      dataFilesRead: Int,
      rowsResolved: Long,
      positionDeleteFilesWritten: Int,
      deletionVectorsWritten: Int,
      deleteFilesReplaced: Int,
      dryRun: Boolean,
      seconds: Double,
      commitNote: Option[String] = None) {
    def committed: Boolean = snapshotId.isDefined

    /** The values of [[Result.Fields]], in their order. */
    def values: Seq[Any] = Seq(table, startingSnapshotId, snapshotId.map(Long.box).orNull, formatVersion,
      equalityDeleteFilesRemoved, equalityDeleteFilesKept, dataFilesRead, rowsResolved, positionDeleteFilesWritten,
      deletionVectorsWritten, deleteFilesReplaced, dryRun, seconds, commitNote.orNull)

    /** Field name to value, for Python and the SQL procedure's row. */
    def asJava: java.util.Map[String, Any] = Result.Fields.map(_._1).zip(values).toMap.asJava
  }

  object Result {
    /**
     * The one schema of a result: its fields' names and SQL types, in order. The procedure's
     * columns are these, and Python's `ResolveResult` has the same fields (a test checks both).
     */
    val Fields: Seq[(String, DataType)] = Seq(
      "table" -> StringType, "starting_snapshot_id" -> LongType, "snapshot_id" -> LongType, "format_version" -> IntegerType,
      "equality_delete_files_removed" -> IntegerType, "equality_delete_files_kept" -> IntegerType,
      "data_files_read" -> IntegerType, "rows_resolved" -> LongType, "position_delete_files_written" -> IntegerType,
      "deletion_vectors_written" -> IntegerType, "delete_files_replaced" -> IntegerType, "dry_run" -> BooleanType,
      "seconds" -> DoubleType, "commit_note" -> StringType)
    /** None when nothing was committed; None when the commit's answer came. */
    val Nullable: Set[String] = Set("snapshot_id", "commit_note")
  }

  /** A concurrent commit conflicted with the resolve, which started from `startingSnapshotId`; nothing was committed. */
  final class ResolveConflictException(message: String, val startingSnapshotId: Long, cause: Throwable)
    extends RuntimeException(message, cause)

  /**
   * The resolve failed for another reason than a conflict (a delete file it could not read, a
   * write to the store that failed, a catalog it could not reach); nothing was committed.
   */
  final class ResolveFailedException(message: String, val startingSnapshotId: Long, cause: Throwable)
    extends RuntimeException(message, cause)

  /**
   * @param tableName a table as Spark names it (`catalog.db.table`)
   * @param where     a filter on partition columns (SQL), or null for the whole table
   */
  def run(session: SparkSession, tableName: String, where: String, dryRun: Boolean): Result = {
    val started = System.nanoTime()
    if (!dryRun) prepare(session, tableName, where, started).commit()
    else {
      val work = workFor(session, tableName, where)
      val rows = work.deletes.map { deletes =>
        JobDescription.during(session.sparkContext,
            s"eqdelete resolve ${work.table.name()} (dry run): counting the rows equality deletes remove") {
          DeletedPositions.of(session, work, deletes).distinct().count()
        }
      }.getOrElse(0L)
      result(work, None, rows, work.deletes.map(DeletedPositions.dataFilesRead).getOrElse(0), Nil, dryRun = true, started)
    }
  }

  /**
   * The first half of a run: plans, finds the rows and writes their deletes, committing nothing
   * (tests put a concurrent commit between the halves).
   */
  def prepare(session: SparkSession, tableName: String, where: String): Prepared =
    prepare(session, tableName, where, System.nanoTime())

  /** What finds a resolve's positions: the rows `(_file, _pos)`, and how many data files it read for them. */
  private[eqdelete] final case class FoundPositions(rows: DataFrame, dataFilesRead: Int)

  /**
   * [[prepare]] with the positions found by `positions` instead of [[DeletedPositions]] (a kept
   * index of the live rows); `settled` is told the commit's result, or None when it did not commit.
   */
  private[eqdelete] def prepareWith(session: SparkSession, tableName: String)(
      positions: (ResolveWork, ScanDeletes) => FoundPositions, settled: Option[Result] => Unit): Prepared =
    prepare(session, tableName, null, System.nanoTime(), Some(positions), settled)

  private def prepare(session: SparkSession, tableName: String, where: String, started: Long,
      positionsFinder: Option[(ResolveWork, ScanDeletes) => FoundPositions] = None,
      settled: Option[Result] => Unit = _ => ()): Prepared = {
    val positions = positionsFinder.getOrElse((work: ResolveWork, deletes: ScanDeletes) =>
      FoundPositions(DeletedPositions.of(session, work, deletes), DeletedPositions.dataFilesRead(deletes)))
    val work = workFor(session, tableName, where)
    var filesRead = 0
    val written = work.deletes.toSeq.flatMap { deletes =>
      JobDescription.during(session.sparkContext,
          s"eqdelete resolve ${work.table.name()}: finding and writing the rows equality deletes remove") {
        try {
          val found = positions(work, deletes)
          filesRead = found.dataFilesRead
          PositionDeleteWriting.write(work.table, work.formatVersion, targets(deletes), found.rows)
        } catch {
          // A Spark job's failure is pages long; the line that matters is its cause's. Files its
          // tasks wrote before it failed are never committed: orphans, as after any failed write.
          case NonFatal(e) => throw new ResolveFailedException(s"eqdelete: resolving the equality deletes of " +
            s"${work.table.name()} failed before its commit: ${Failures.describe(e)}. Nothing was committed; the table " +
            s"is as it was at snapshot ${work.snapshotId}.", work.snapshotId, e)
        }
      }
    }
    new Prepared(work, written, filesRead, started, settled)
  }

  /** Deletes written for a resolve, not committed yet. */
  final class Prepared private[ResolveEqualityDeletes] (work: ResolveWork, written: Seq[WrittenDeletes], filesRead: Int,
      started: Long, settled: Option[Result] => Unit) {
    /** Commits them with the removals, if there is anything to commit; the outcome. */
    def commit(): Result = {
      val done = try {
        val committed = if (work.removable.isEmpty && written.isEmpty) None else Some(commitDelta(work, written))
        result(work, committed.map(_._1), written.map(_.positions).sum, filesRead, written, dryRun = false, started)
          .copy(commitNote = committed.flatMap(_._2))
      } catch {
        case e: Throwable =>
          settled(None)
          throw e
      }
      settled(Some(done))
      done
    }

    /**
     * Not to be committed after all: the files written are deleted (no commit was sent, so none
     * can reference them), and what was kept for the commit is let go.
     */
    def abandon(): Unit =
      try WrittenDeletes.discard(work.table.io(), written, "a resolve abandoned before its commit") finally settled(None)
  }

  private def result(work: ResolveWork, snapshot: Option[Long], rows: Long, filesRead: Int, written: Seq[WrittenDeletes],
      dryRun: Boolean, started: Long): Result = {
    val files = written.flatMap(_.files)
    val dvs = files.count(IcebergInternals.isDeletionVector)
    Result(work.table.name(), work.snapshotId, snapshot, work.formatVersion,
      if (snapshot.isDefined || dryRun) work.removable.size else 0, work.kept, filesRead, rows, files.size - dvs, dvs,
      replaced(written).size, dryRun, (System.nanoTime() - started) / 1e9)
  }

  /**
   * The delete files the written deletion vectors replace, once each. A deletion vector is a blob
   * of a Puffin file, and one Puffin file may hold many (Flink writes one per checkpoint): a DV is
   * its file's location and its blob's offset, not the location alone.
   */
  private def replaced(written: Seq[WrittenDeletes]): Seq[DeleteFile] =
    written.flatMap(_.replaced).groupBy(f => (f.location(), Option(f.contentOffset()).map(_.longValue()))).values.map(_.head).toSeq

  /**
   * On a Spark and Iceberg pair this jar was not built for, the rewrite stands aside; a resolve,
   * which writes and commits, refuses to start with the same reason rather than risk a half-linked run.
   */
  private def requireSupportedVersions(): Unit = SupportedVersions.unsupported.foreach { why =>
    throw new UnsupportedOperationException(s"eqdelete ${SupportedVersions.eqdelete} cannot resolve equality deletes: $why")
  }

  /** The table as Spark reads it now, and the filter's conjuncts bound to that read. */
  private[eqdelete] def workFor(session: SparkSession, tableName: String, whereSql: String): ResolveWork = {
    requireSupportedVersions()
    val where = Option(whereSql).map(_.trim).filter(_.nonEmpty)
    // Iceberg's catalog may cache the table: start from its newest metadata.
    IcebergSparkTables.current(session, tableName)
    val frame = where.foldLeft(session.table(tableName))((df, condition) => df.where(condition))
    val analyzed = EliminateSubqueryAliases(frame.queryExecution.analyzed)
    val relation = analyzed.collectFirst { case r: DataSourceV2Relation => r }.getOrElse(
      throw new IllegalArgumentException(s"eqdelete: $tableName is not an Iceberg table"))
    val table: Table = IcebergSparkTables.icebergTable(relation.table).getOrElse(throw new IllegalArgumentException(
      s"eqdelete: $tableName is not an Iceberg table (${relation.table.getClass.getName})"))
    val conditions = analyzed.collectFirst { case Filter(condition, _) => splitConjunctivePredicates(condition) }.getOrElse(Nil)
    val snapshot = IcebergSparkTables.snapshotId(relation.table)
    val target = ResolveTarget(table, relation, snapshot.getOrElse(-1L), IcebergInternals.formatVersion(table), conditions)
    if (snapshot.isEmpty) ResolveWork.empty(target) else ResolveWork.of(target, session.sessionState.conf.caseSensitiveAnalysis)
  }

  /** Every planned data file with its spec, partition and position deletes, for the writers. */
  private def targets(deletes: ScanDeletes): Map[String, TargetFile] =
    deletes.scan.tasks.map { task =>
      val positionDeletes = task.deletes().asScala.filter(_.content() == FileContent.POSITION_DELETES).toVector
      task.file().location() -> TargetFile(task.spec().specId(), task.file().partition(), positionDeletes)
    }.toMap

  /**
   * Commits the written deletes and the removals in one `RowDelta` validated from the run's
   * snapshot, through a [[GuardedCommit]]: the snapshot committed (with the failure the client saw
   * if it landed all the same). The files written are deleted only when the commit is known not to
   * have landed; when that cannot be known they are kept, for a landed snapshot may reference them.
   */
  private def commitDelta(work: ResolveWork, written: Seq[WrittenDeletes]): (Long, Option[String]) = {
    def head(): Option[Long] =
      Try { work.table.refresh(); Option(work.table.currentSnapshot()).map(_.snapshotId()) }.toOption.flatten
    var before = head()
    var outcome = commitOnce(work, written)
    // Beside a writer committing faster than Iceberg's tries take, every try can lose the race
    // while the change still holds (its validation from the run's snapshot passed): it is sent
    // again on the new head with the same files, each time a fresh RowDelta and marker, rather
    // than the whole resolve redone. The guard has settled that a lost try can never land. Only
    // while others' commits move the head: a refusal with the head where it was is not a race.
    def lostTheRace(): Boolean = outcome match {
      case CommitOutcome.NotCommitted(failure) if Failures.lostTheRace(failure) =>
        val now = head()
        val moved = now != before
        before = now
        moved
      case _ => false
    }
    var rebases = 0
    while (rebases < MaxRebases && lostTheRace()) {
      rebases += 1
      logInfo(s"eqdelete: the resolve of ${work.table.name()} lost the race to other commits; sending it again on " +
        s"the new head (rebase $rebases of $MaxRebases)")
      outcome = commitOnce(work, written)
    }
    settled(work, written, outcome)
  }

  /** Further sends of a resolve's commit that lost the race to other commits (each one Iceberg's own tries). */
  private[eqdelete] val MaxRebases = 10

  private def commitOnce(work: ResolveWork, written: Seq[WrittenDeletes]): CommitOutcome = {
    val marker = SummaryKey -> java.util.UUID.randomUUID().toString
    GuardedCommit.run(work.table, marker) { table =>
      val delta = table.newRowDelta()
      written.flatMap(_.files).foreach(delta.addDeletes)
      replaced(written).foreach(delta.removeDeletes)
      work.removable.foreach(delta.removeDeletes)
      delta.set(marker._1, marker._2)
      delta.validateFromSnapshot(work.snapshotId)
        .validateDataFilesExist(written.flatMap(_.referenced).distinct.map(p => p: CharSequence).asJava)
        .validateDeletedFiles()
        .commit()
    }
  }

  private def settled(work: ResolveWork, written: Seq[WrittenDeletes], outcome: CommitOutcome): (Long, Option[String]) = {
    val name = work.table.name()
    outcome match {
      case CommitOutcome.Committed(snapshot, recovered) =>
        recovered.foreach(why => logWarning(s"eqdelete: the resolve of $name committed snapshot $snapshot, though the client saw: $why"))
        (snapshot, recovered.map(why => s"the commit's answer was lost ($why); its snapshot was found in the table"))
      case CommitOutcome.NothingToCommit =>
        throw new IllegalStateException(s"eqdelete: the resolve of $name made a commit with no change")
      case CommitOutcome.NotCommitted(failure) =>
        WrittenDeletes.discard(work.table.io(), written, "a resolve")
        val why = Failures.describe(failure)
        if (Failures.isConflict(failure)) {
          throw new ResolveConflictException(s"eqdelete: resolving the equality deletes of $name conflicts with a commit " +
            s"made since snapshot ${work.snapshotId}: $why. Nothing was committed; run it again.", work.snapshotId, failure)
        }
        throw new ResolveFailedException(s"eqdelete: the commit resolving the equality deletes of $name failed: $why. " +
          s"Nothing was committed (snapshot ${work.snapshotId} is still the base) and the files written were deleted; " +
          "run it again.", work.snapshotId, failure)
      case CommitOutcome.Unknown(failure, why) =>
        val kept = written.flatMap(_.files).map(_.location()).distinct.size
        throw new CommitOutcomeUnknownException(s"eqdelete: the commit resolving the equality deletes of $name has an " +
          s"unknown outcome: ${Failures.describe(failure)}; $why. Nothing was deleted ($kept file(s) written are kept), " +
          s"so the table reads right either way; run it again once the catalog answers: it resolves what is left.",
          work.snapshotId, failure)
    }
  }

  /** The snapshot summary property marking a resolve's commit. */
  val SummaryKey = "eqdelete.resolve-id"
}
