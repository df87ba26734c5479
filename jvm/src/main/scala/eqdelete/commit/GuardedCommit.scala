package eqdelete.commit

import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import org.apache.iceberg.Table
import org.apache.spark.sql.eqdelete.compat.{AttemptOutcome, CommitAttempt, GuardedTableOperations}

/** What became of a commit, as far as the table can show. */
sealed trait CommitOutcome

object CommitOutcome {
  /**
   * It committed `snapshotId`. `recovered` is the failure the client saw although the commit
   * landed (a lost answer, a 409 to a commit sent again), when there was one.
   */
  final case class Committed(snapshotId: Long, recovered: Option[String]) extends CommitOutcome
  /** The operation found nothing to commit and sent nothing. */
  case object NothingToCommit extends CommitOutcome
  /** Nothing was committed, and nothing of it can land later: what it wrote may be deleted. */
  final case class NotCommitted(failure: Throwable) extends CommitOutcome
  /** It may or may not have landed (`why`): nothing it wrote may be deleted. */
  final case class Unknown(failure: Throwable, why: String) extends CommitOutcome
}

/**
 * A commit whose outcome is established from the table, never assumed from an error: its
 * attempts run through [[GuardedTableOperations]], and every snapshot they add carries `marker`
 * in its summary. See [[SettleCommit]] for how a failed attempt is decided.
 */
object GuardedCommit {

  /**
   * Runs `commit` on a guarded copy of `table` (it must commit through the table it is given,
   * with `marker` in its snapshot's summary) and says what became of it: every failure, before
   * or after an attempt was sent, becomes an outcome.
   */
  def run(table: Table, marker: (String, String), settle: SettleCommit = SettleCommit.default)(commit: Table => Unit): CommitOutcome =
    GuardedTableOperations.wrap(table, marker, settle) match {
      case Some((guarded, ops)) =>
        try {
          commit(guarded)
          if (ops.attemptsMade.isEmpty) CommitOutcome.NothingToCommit
          else committed(ops.attemptsMade).getOrElse(byMarker(table, marker, None))
        } catch {
          case NonFatal(failure) =>
            val attempts = ops.attemptsMade
            committed(attempts).getOrElse {
              if (attempts.forall(_.outcome.isInstanceOf[AttemptOutcome.NotLanded])) CommitOutcome.NotCommitted(failure)
              else byMarker(table, marker, Some(failure))
            }
        }
      case None =>
        // Nothing to guard with: the outcome is the marker's, and never "not committed".
        try {
          commit(table)
          byMarker(table, marker, None)
        } catch {
          case NonFatal(failure) => byMarker(table, marker, Some(failure))
        }
    }

  /** The attempt that committed, if one did as far as the attempts know. */
  private def committed(attempts: Seq[CommitAttempt]): Option[CommitOutcome.Committed] = attempts.reverseIterator.collectFirst {
    case CommitAttempt(_, Some(id), _, _, _, AttemptOutcome.Succeeded) => CommitOutcome.Committed(id, None)
    case CommitAttempt(_, Some(id), _, _, _, AttemptOutcome.Landed(why)) => CommitOutcome.Committed(id, Some(why))
    case CommitAttempt(_, _, _, _, _, AttemptOutcome.EarlierLanded(id, why)) => CommitOutcome.Committed(id, Some(why))
  }

  /** The snapshot carrying `marker`, read afresh (a few tries); Unknown when none is found after `failure`. */
  private def byMarker(table: Table, marker: (String, String), failure: Option[Throwable]): CommitOutcome = {
    val found = (1 to 3).iterator.map { i =>
      if (i > 1) Thread.sleep(1000L * (i - 1))
      SettleCommit.tryOrNone {
        table.refresh()
        table.snapshots().asScala.find(s => marker._2 == s.summary().get(marker._1)).map(_.snapshotId())
      }
    }.collectFirst { case Some(found) => found }
    (found.flatten, failure) match {
      case (Some(id), why) => CommitOutcome.Committed(id, why.map(Failures.describe))
      case (None, Some(e)) => CommitOutcome.Unknown(e, "its snapshot is not in the table, which may still take it, or could not be read")
      case (None, None) => CommitOutcome.NothingToCommit  // succeeded without a snapshot of its own
    }
  }
}
