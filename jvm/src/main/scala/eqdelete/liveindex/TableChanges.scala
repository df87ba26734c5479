package eqdelete.liveindex

import scala.collection.mutable
import scala.jdk.CollectionConverters._

import org.apache.iceberg.{DataOperations, DeleteFile, FileContent, Snapshot, Table}

/**
 * What other writers changed in a table's live rows between the snapshot an index of them
 * reflects and a newer one, beyond the data files the round's own scan plans: the position
 * deletes they added. Read from the delete manifests the snapshots between added only, so it
 * costs the change, not the table; the data files added and gone are the difference between
 * the files the index holds and those the round plans, which needs no manifest of its own.
 *
 * @param positionDeletes   position delete files and deletion vectors others added to the table
 *                          since, outside a `replace` (which changes no row): the rows they
 *                          delete in older data files must leave the index; those of data files
 *                          added since are applied when those files are read
 * @param snapshots         the snapshots walked, oldest first
 */
final case class TableChanges(positionDeletes: Seq[DeleteFile], snapshots: Seq[Long])

object TableChanges {

  /**
   * The changes from snapshot `from` (exclusive) to `to` (inclusive). None when `from` is not an
   * ancestor of `to`, or a snapshot between them is no longer in the metadata (expired): the
   * index cannot be brought forward and is built again. `own` says whether a snapshot is one of
   * the index's own resolves, whose deletes it removed when they committed.
   */
  def between(table: Table, from: Long, to: Long, own: Snapshot => Boolean): Option[TableChanges] =
    lineage(table, from, to).map { walked =>
      val deletes = walked.filter(s => s.operation() != DataOperations.REPLACE && !own(s)).flatMap { snapshot =>
        snapshot.addedDeleteFiles(table.io()).asScala
          .filter(_.content() == FileContent.POSITION_DELETES).map(_.copyWithoutStats())
      }
      TableChanges(deletes.toVector, walked.map(_.snapshotId()))
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
