package eqdelete.resolve

import scala.collection.mutable

import eqdelete.liveindex.{LiveKeyEntry, LiveKeyIndex, TableChanges}
import eqdelete.planning.{EqualityDeleteSet, ScanDeletes}
import eqdelete.scan.FileSelection

import org.apache.spark.rdd.RDD
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.eqdelete.compat.IcebergInternals

/**
 * An index of one table's live rows by the key of one equality set, kept across rounds by a
 * long-running `maintain` and brought forward to each round's snapshot from the snapshots
 * between ([[TableChanges]]): files added since are read and indexed, files gone are no longer
 * in use, files whose rows another writer deleted by position since are read again under a new
 * id, and the positions its own rounds resolved are removed when they commit. When the
 * snapshot it reflects is not an ancestor of the round's, or a snapshot between has expired, it
 * is built again from the table.
 *
 * The driver holds, per data file, its id: what grows with files, not rows. Entries of files no
 * longer in use stay in the stores until the index is built again (not yet purged).
 */
final class KeptLiveIndex private (val equalityIds: Seq[Int], private val index: LiveKeyIndex) {
  private var reflects: Option[Long] = None
  private val ids = mutable.HashMap.empty[String, Int]
  private var nextId = 0
  private val own = mutable.Set.empty[Long]

  /** The snapshot the index reflects, if it has been brought to one. */
  def snapshot: Option[Long] = reflects

  /** How many files were read to bring it forward, the last time: all of them when it was built. */
  var filesRead: Int = 0

  /** The index brought to the work's snapshot; then `set`'s removals found in it, not yet committed. */
  def positions(session: SparkSession, work: ResolveWork, deletes: ScanDeletes, set: EqualityDeleteSet): RDD[IndexedDeletedPositions.Found] = {
    bringTo(session, work, deletes, set)
    IndexedDeletedPositions.found(session.sparkContext, index, IndexedDeletedPositions.strippedScan(session, work, deletes,
      FileSelection.Only(Set.empty)), set, IndexedDeletedPositions.files(deletes, ids.toMap))
  }

  private def bringTo(session: SparkSession, work: ResolveWork, deletes: ScanDeletes, set: EqualityDeleteSet): Unit = {
    val table = work.table
    val planned = deletes.scan.tasks.map(_.file().location()).toSet
    val changes = reflects.flatMap(from => TableChanges.between(table, from, work.snapshotId, s => own.contains(s.snapshotId())))
    val toRead = changes match {
      case None =>  // built (again): every file
        ids.clear()
        planned
      case Some(c) =>
        val known = ids.keySet.toSet
        val deletedByOthers = c.positionDeletes.flatMap(IcebergInternals.positionDeleteTargets(table.io(), _)).toSet
        ids --= (known -- planned)
        (planned -- known) ++ (deletedByOthers intersect known intersect planned)
    }
    toRead.foreach { p => ids(p) = nextId; nextId += 1 }
    if (toRead.nonEmpty) {
      val scan = IndexedDeletedPositions.strippedScan(session, work, deletes, FileSelection.Only(toRead))
      index.add(IndexedDeletedPositions.entries(session, scan, set, ids.filter { case (p, _) => toRead(p) }.toMap))
    }
    filesRead = toRead.size
    reflects = Some(work.snapshotId)
  }

  /** After the round's commit, snapshot `committed`: the entries it resolved leave the index. */
  def committed(committed: Long, resolved: RDD[LiveKeyEntry]): Unit = {
    index.remove(resolved)
    own += committed
  }

  def drop(session: SparkSession): Unit = index.drop(session.sparkContext)
}

object KeptLiveIndex {
  def create(session: SparkSession, equalityIds: Seq[Int], partitions: Int): KeptLiveIndex =
    new KeptLiveIndex(equalityIds, LiveKeyIndex.create(session.sparkContext, partitions))
}
