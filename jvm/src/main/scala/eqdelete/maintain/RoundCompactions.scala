package eqdelete.maintain

import scala.jdk.CollectionConverters._

import eqdelete.commit.{CommitOutcome, Failures, GuardedCommit}

import org.apache.spark.internal.Logging
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.eqdelete.compat.IcebergActions

/**
 * A round's own rewrites after its resolve, each a guarded commit: the position delete files
 * (format v2, [[PositionDeleteCompaction]]) once a reader of some data file opens the table's
 * threshold of them, and the data files deletes emptied enough of ([[DataCompaction]]).
 */
object RoundCompactions extends Logging {

  /** What a maintenance commit did, the conflict that left it to the next round, and what the client saw of a lost answer. */
  final case class Maintenance[A](done: Option[A], conflict: Option[String], note: Option[String])
  object Maintenance { def none[A]: Maintenance[A] = Maintenance[A](None, None, None) }

  /** The snapshot summary property marking a compaction's commit. */
  val CompactionKey = "eqdelete.compaction-id"

  /**
   * Rewrites the position delete files once a reader of some data file would open at least the
   * setting's number of them: what it did, the conflict that left it to the next round, and what
   * the client saw if the commit landed all the same.
   */
  def positionDeletes(session: SparkSession, table: org.apache.iceberg.Table,
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

  /** Rewrites the data files past the dead-row share, within the hour's budget; and what went past it. */
  def data(session: SparkSession, table: org.apache.iceberg.Table,
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
}
