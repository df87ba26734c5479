package eqdelete.liveindex

import scala.collection.mutable
import scala.jdk.CollectionConverters._

import org.apache.iceberg.{DataFile, DataOperations, DeleteFile, FileContent, Snapshot, Table}

/**
 * What changed in a table's live rows between the snapshot an index of them reflects and a
 * newer one, from the manifests of the snapshots between only (what each added and removed),
 * so it costs the change, not the table.
 *
 * @param addedData         data files added since, and still there: their rows are new entries
 * @param removedData       data files gone since (a compaction, an overwrite, a delete): their entries are dead
 * @param positionDeletes   position delete files and deletion vectors others added to the table
 *                          since, outside a `replace` (which changes no row): the rows they
 *                          delete in older data files must leave the index; those of files in
 *                          `addedData` are applied when those files are read
 * @param snapshots         the snapshots walked, oldest first
 */
final case class TableChanges(
    addedData: Seq[DataFile],
    removedData: Set[String],
    positionDeletes: Seq[DeleteFile],
    snapshots: Seq[Long])

object TableChanges {

  /**
   * The changes from snapshot `from` (exclusive) to `to` (inclusive). None when `from` is not an
   * ancestor of `to`, or a snapshot between them is no longer in the metadata (expired): the
   * index cannot be brought forward and is built again. `own` says whether a snapshot is one of
   * the index's own resolves, whose deletes it removed when they committed.
   */
  def between(table: Table, from: Long, to: Long, own: Snapshot => Boolean): Option[TableChanges] =
    lineage(table, from, to).map { walked =>
      val added = mutable.LinkedHashMap.empty[String, DataFile]
      val removed = mutable.Set.empty[String]
      val deletes = mutable.ArrayBuffer.empty[DeleteFile]
      walked.foreach { snapshot =>
        snapshot.removedDataFiles(table.io()).asScala.foreach { f =>
          if (added.remove(f.location()).isEmpty) removed += f.location()
        }
        snapshot.addedDataFiles(table.io()).asScala.foreach(f => added(f.location()) = f.copyWithoutStats())
        if (snapshot.operation() != DataOperations.REPLACE && !own(snapshot)) {
          deletes ++= snapshot.addedDeleteFiles(table.io()).asScala
            .filter(_.content() == FileContent.POSITION_DELETES).map(_.copyWithoutStats())
        }
      }
      TableChanges(added.values.toVector, removed.toSet, deletes.toVector, walked.map(_.snapshotId()))
    }

  /** The snapshots after `from` up to `to`, oldest first, if every one is there and `from` is an ancestor. */
  private def lineage(table: Table, from: Long, to: Long): Option[Seq[Snapshot]] = {
    val walked = mutable.ArrayBuffer.empty[Snapshot]
    var at = Option(table.snapshot(to))
    while (at.exists(_.snapshotId() != from)) {
      val snapshot = at.get
      walked += snapshot
      at = Option(snapshot.parentId()).flatMap(parent => Option(table.snapshot(parent.longValue())))
    }
    if (at.isEmpty) None else Some(walked.reverse.toSeq)
  }
}
