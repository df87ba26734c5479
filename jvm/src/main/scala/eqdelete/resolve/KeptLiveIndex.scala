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
final class KeptLiveIndex private (private val index: LiveKeyIndex) {
  private var reflects: Option[Long] = None
  private val ids = mutable.HashMap.empty[String, Int]
  private var nextId = 0
  private val own = mutable.Set.empty[Long]

  /** The index brought to the work's snapshot; then `set`'s removals found in it, not yet committed. */
  def positions(session: SparkSession, work: ResolveWork, deletes: ScanDeletes, set: EqualityDeleteSet): RDD[IndexedDeletedPositions.Found] = {
    val toRead = filesToRead(work, deletes)
    // One scan serves both: it reads the files brought in, and names the key columns the lookup packs.
    val scan = IndexedDeletedPositions.strippedScan(session, work, deletes, FileSelection.Only(toRead))
    if (toRead.nonEmpty) index.add(IndexedDeletedPositions.entries(session, scan, set, ids.filter { case (p, _) => toRead(p) }.toMap))
    reflects = Some(work.snapshotId)
    IndexedDeletedPositions.found(session.sparkContext, index, scan, set, IndexedDeletedPositions.files(deletes, ids.toMap))
  }

  /** The files to read to bring the index to the work's snapshot, each given a new id: all of them when it is built (again). */
  private def filesToRead(work: ResolveWork, deletes: ScanDeletes): Set[String] = {
    val table = work.table
    val planned = deletes.scan.tasks.map(_.file().location()).toSet
    val changes = reflects.flatMap(from => TableChanges.between(table, from, work.snapshotId, s => own.contains(s.snapshotId())))
    val toRead = changes match {
      case None =>
        ids.clear()
        planned
      case Some(c) =>
        val known = ids.keySet.toSet
        val deletedByOthers = c.positionDeletes.flatMap(IcebergInternals.positionDeleteTargets(table.io(), _)).toSet
        ids --= (known -- planned)
        (planned -- known) ++ (deletedByOthers intersect known intersect planned)
    }
    toRead.foreach { p => ids(p) = nextId; nextId += 1 }
    toRead
  }

  /** After the round's commit, snapshot `committed`: the entries it resolved leave the index. */
  def committed(committed: Long, resolved: RDD[LiveKeyEntry]): Unit = {
    index.remove(resolved)
    own += committed
  }

  def drop(session: SparkSession): Unit = index.drop(session.sparkContext)
}

object KeptLiveIndex {
  def create(session: SparkSession, partitions: Int): KeptLiveIndex =
    new KeptLiveIndex(LiveKeyIndex.create(session.sparkContext, partitions))
}
