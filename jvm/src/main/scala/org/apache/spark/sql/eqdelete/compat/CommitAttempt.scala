package org.apache.spark.sql.eqdelete.compat

import org.apache.iceberg.{Snapshot, TableMetadata}

/** What became of one attempt to commit, as the table showed it after the attempt's answer. */
sealed trait AttemptOutcome

object AttemptOutcome {
  /** Sent; no answer yet. */
  case object Pending extends AttemptOutcome
  /** The catalog answered that it committed. */
  case object Succeeded extends AttemptOutcome
  /** Failed on the client (`failure`), but its snapshot is in the table. */
  final case class Landed(failure: String) extends AttemptOutcome
  /** Failed (`failure`), and an earlier attempt of the same commit is in the table as `snapshotId`. */
  final case class EarlierLanded(snapshotId: Long, failure: String) extends AttemptOutcome
  /** Failed (`failure`), and it cannot land any more. */
  final case class NotLanded(failure: String) extends AttemptOutcome
  /** Failed (`failure`), and the table could not show whether it landed, or it may still land. */
  final case class Unknown(failure: String) extends AttemptOutcome
}

/**
 * One attempt of a commit (Iceberg retries a commit on a new head after a conflict).
 *
 * @param snapshotId   the snapshot it adds, carrying the commit's marker (None if it adds none).
 *                     Iceberg gives every attempt of a commit the same snapshot id, so the
 * @param manifestList snapshot's manifest list (written anew by each attempt) tells them apart
 * @param branch       the branch it moves to that snapshot
 * @param baseHead     that branch's head in the metadata the attempt started from
 */
final case class CommitAttempt(number: Int, snapshotId: Option[Long], manifestList: Option[String], branch: Option[String],
    baseHead: Option[Long], outcome: AttemptOutcome = AttemptOutcome.Pending)

/** The table as read afresh after a failed attempt, in Iceberg's API terms. */
final class TableState private[compat] (metadata: TableMetadata) {
  def snapshot(id: Long): Option[Snapshot] = Option(metadata.snapshot(id))
  /** The branch's head, None when the branch is gone. */
  def head(branch: String): Option[Long] = Option(metadata.ref(branch)).map(_.snapshotId())
}

/** Decides what became of a failed attempt ([[GuardedTableOperations]] asks it); `read` reads the table afresh. */
trait CommitJudge {
  def apply(attempt: CommitAttempt, failure: Throwable, read: () => TableState): AttemptOutcome
}
