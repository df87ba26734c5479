package org.apache.spark.sql.eqdelete.compat

import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import org.apache.iceberg.{BaseTable, HasTableOperations, Snapshot, Table, TableMetadata, TableOperations}
import org.apache.iceberg.encryption.EncryptionManager
import org.apache.iceberg.exceptions.{CommitFailedException, CommitStateUnknownException}
import org.apache.iceberg.io.{FileIO, LocationProvider}
import org.apache.spark.internal.Logging

/**
 * A table's own `TableOperations` with one change: a commit attempt that fails is first looked
 * for in the table before Iceberg is told it failed, because a failed answer does not prove a
 * failed commit. A catalog can commit and the answer be lost, or a gateway (or Iceberg's REST
 * client, after a 503 with `Retry-After`) send the commit again and get a 409 for it, because the
 * table's head has moved by that very commit. Iceberg takes the 409 for a conflict and retries:
 * a validated commit then fails its validation against its own landed snapshot and deletes the
 * manifests it wrote, the landed commit's among them (and the caller its delete files), so the
 * current snapshot names missing files; an unvalidated one finds its own snapshot id in the table
 * and "rolls back" to it, dropping a writer's commit made on top (docs/known-iceberg-issues.md).
 *
 * So, after a failed attempt (the [[CommitJudge]] decides; eqdelete's is `eqdelete.commit.SettleCommit`):
 *  - its snapshot is in the table: the attempt committed, and Iceberg is told it succeeded;
 *  - an earlier attempt's is (every attempt has the same snapshot id; its manifest list tells
 *    them apart): `CommitStateUnknownException`, so Iceberg neither retries nor deletes anything
 *    (the caller finds the landed snapshot by its marker);
 *  - it cannot land any more (not there, and the branch moved on, or refused with the branch
 *    still at its base): `CommitFailedException`, which Iceberg retries on the new head;
 *  - anything else: `CommitStateUnknownException`: Iceberg neither retries nor deletes.
 *
 * Iceberg deletes a failed commit's files only after a `CleanableFailure` (a refused commit, a
 * failed validation), so it deletes nothing a landed attempt references. Every other method is
 * the table's own. (`TableOperations` is the same in Iceberg 1.10, 1.11 and 1.12.)
 *
 * @param marker the snapshot summary property (key, value) every attempt of this commit carries
 */
final class GuardedTableOperations private (delegate: TableOperations, tableName: String, marker: (String, String),
    settle: CommitJudge) extends TableOperations with Logging {

  @volatile private var made = Vector.empty[CommitAttempt]

  /** The attempts made so far, oldest first, each with its outcome. */
  def attemptsMade: Vector[CommitAttempt] = made

  override def current(): TableMetadata = delegate.current()
  override def refresh(): TableMetadata = delegate.refresh()
  override def io(): FileIO = delegate.io()
  override def encryption(): EncryptionManager = delegate.encryption()
  override def metadataFileLocation(fileName: String): String = delegate.metadataFileLocation(fileName)
  override def locationProvider(): LocationProvider = delegate.locationProvider()
  override def temp(uncommittedMetadata: TableMetadata): TableOperations = delegate.temp(uncommittedMetadata)
  override def newSnapshotId(): Long = delegate.newSnapshotId()
  override def requireStrictCleanup(): Boolean = delegate.requireStrictCleanup()

  override def commit(base: TableMetadata, metadata: TableMetadata): Unit = {
    val staged = stagedSnapshot(base, metadata)
    // The branch the attempt moves (the one whose head becomes its snapshot) and that branch's head at its base.
    val branch = staged.flatMap(s => metadata.refs().asScala.collectFirst { case (name, ref) if ref.snapshotId() == s.snapshotId() => name })
    val baseHead = for (b <- branch; m <- Option(base); ref <- Option(m.ref(b))) yield ref.snapshotId()
    val attempt = CommitAttempt(made.size + 1, staged.map(_.snapshotId()), staged.map(_.manifestListLocation()), branch, baseHead)
    record(attempt)
    try {
      delegate.commit(base, metadata)
      record(attempt.copy(outcome = AttemptOutcome.Succeeded))
    } catch {
      case NonFatal(failure) =>
        val outcome = settle(attempt, failure, () => new TableState(delegate.refresh()))
        record(attempt.copy(outcome = outcome))
        outcome match {
          case AttemptOutcome.Landed(_) =>
            logWarning(s"eqdelete: the commit to $tableName failed on the client ($failure), but its snapshot " +
              s"${attempt.snapshotId.getOrElse("?")} is in the table: it landed")
          case AttemptOutcome.EarlierLanded(id, _) =>
            throw new CommitStateUnknownException(s"an earlier attempt of this commit landed as snapshot $id", failure)
          case AttemptOutcome.NotLanded(_) =>
            failure match {
              case refused: CommitFailedException => throw refused
              case other => throw new CommitFailedException(other, "Commit did not land: %s", String.valueOf(other))
            }
          case _ =>
            throw failure match {
              case unknown: CommitStateUnknownException => unknown
              case other => new CommitStateUnknownException(other)
            }
        }
    }
  }

  private def record(attempt: CommitAttempt): Unit = synchronized {
    made = made.filterNot(_.number == attempt.number) :+ attempt
  }

  /** The snapshot this attempt adds that carries the marker (None for a commit adding none). */
  private def stagedSnapshot(base: TableMetadata, metadata: TableMetadata): Option[Snapshot] = {
    val before = Option(base).map(_.snapshots().asScala.map(_.snapshotId()).toSet).getOrElse(Set.empty[Long])
    metadata.snapshots().asScala.find { s =>
      !before.contains(s.snapshotId()) && marker._2 == s.summary().get(marker._1)
    }
  }
}

object GuardedTableOperations {

  /**
   * `table` with its commits guarded, and the guard; None when the table exposes no
   * `TableOperations` (then nothing is guarded, and the caller must not delete after a failure).
   */
  def wrap(table: Table, marker: (String, String), settle: CommitJudge): Option[(Table, GuardedTableOperations)] =
    table match {
      case base: BaseTable =>
        val ops = new GuardedTableOperations(base.operations(), table.name(), marker, settle)
        Some((new BaseTable(ops, table.name(), base.reporter()), ops))
      case other: HasTableOperations =>
        val ops = new GuardedTableOperations(other.operations(), table.name(), marker, settle)
        Some((new BaseTable(ops, table.name()), ops))
      case _ => None
    }
}
