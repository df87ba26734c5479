package eqdelete.commit

import scala.util.Try
import scala.util.control.NonFatal

import org.apache.iceberg.exceptions.CommitFailedException
import org.apache.spark.sql.eqdelete.compat.{AttemptOutcome, CommitAttempt, CommitJudge, TableState}

/**
 * Decides what became of a commit attempt that failed, from the table itself: read afresh now and,
 * while that does not settle it, again after each of `waitsMillis` (an answer lost while the
 * catalog still works on the request may land a moment later).
 *
 *  - Its snapshot is in the table: [[AttemptOutcome.Landed]]; the snapshot an earlier attempt of
 *    the same commit staged (the same id, another manifest list): [[AttemptOutcome.EarlierLanded]].
 *  - Not there, and its branch's head is no longer the attempt's base: it can never land, since a
 *    catalog commits an attempt only onto its base ([[AttemptOutcome.NotLanded]]). That is how
 *    Iceberg's REST catalog checks a commit (`assert-ref-snapshot-id`) and how catalogs that swap
 *    a metadata pointer do (the pointer moved with the branch).
 *  - Not there, the head still at its base, and the attempt refused (`CommitFailedException`: a
 *    409 from the catalog or from anything in front of it): [[AttemptOutcome.NotLanded]].
 *  - Not there, the head still at its base, and no answer (a lost or 5xx answer): looked for again
 *    after each wait; then [[AttemptOutcome.NotLanded]] only if the request never reached the
 *    catalog (a refused connection), else [[AttemptOutcome.Unknown]].
 *  - The table cannot be read: [[AttemptOutcome.Unknown]].
 *
 * A snapshot expired within moments of its commit, or a branch rolled back to the attempt's base
 * meanwhile, would mislead these checks; neither is done by a writer or a maintenance job that soon.
 */
final class SettleCommit(waitsMillis: Seq[Long], sleep: Long => Unit = Thread.sleep(_)) extends CommitJudge {

  def apply(attempt: CommitAttempt, failure: Throwable, read: () => TableState): AttemptOutcome = {
    val why = Failures.describe(failure)
    val refused = Failures.causes(failure).exists(_.isInstanceOf[CommitFailedException])

    def look(): Option[AttemptOutcome] = Try(read()).toOption.flatMap { table =>
      attempt.snapshotId.flatMap(table.snapshot) match {
        // The same snapshot id with another manifest list is an earlier attempt of the same commit.
        case Some(landed) if attempt.manifestList.contains(landed.manifestListLocation()) => Some(AttemptOutcome.Landed(why))
        case Some(landed) => Some(AttemptOutcome.EarlierLanded(landed.snapshotId(), why))
        case None => if (movedOn(attempt, table) || refused) Some(AttemptOutcome.NotLanded(why)) else None
      }
    }

    (0L +: waitsMillis).iterator.map { wait =>
      if (wait > 0) sleep(wait)
      look()
    }.collectFirst { case Some(outcome) => outcome }.getOrElse {
      if (Failures.neverSent(failure)) AttemptOutcome.NotLanded(why) else AttemptOutcome.Unknown(why)
    }
  }

  private def movedOn(attempt: CommitAttempt, table: TableState): Boolean = (for {
    branch <- attempt.branch
    base <- attempt.baseHead
  } yield !table.head(branch).contains(base)).getOrElse(false)
}

object SettleCommit {
  /** Looked for now, and again 0.5, 1.5, 3.5 and 7.5 s after a failure that did not settle. */
  val DefaultWaitsMillis: Seq[Long] = Seq(500L, 1000L, 2000L, 4000L)

  def default: SettleCommit = new SettleCommit(DefaultWaitsMillis)

  private[commit] def tryOrNone[T](f: => T): Option[T] = try Option(f) catch { case NonFatal(_) => None }
}
