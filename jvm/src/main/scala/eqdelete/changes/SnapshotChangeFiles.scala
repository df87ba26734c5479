package eqdelete.changes

import scala.jdk.CollectionConverters._

import eqdelete.planning.{AddedFileTasks, DeletePlanner}
import eqdelete.resolve.ResolveEqualityDeletes

import org.apache.iceberg.{DataFile, DataOperations, DeleteFile, FileContent, Snapshot, Table}
import org.apache.spark.sql.eqdelete.compat.IcebergInternals

/**
 * What one snapshot's changes read, from metadata only.
 *
 * @param added     the data files it added: their rows live at the snapshot are its inserts
 * @param touched   data files of its parent it may delete rows of: those it removed, those its
 *                  position deletes or deletion vectors apply to, and those its equality deletes
 *                  apply to (same spec and partition, any for a global delete: every file of the
 *                  parent is older than the snapshot's deletes)
 * @param unchanged why the snapshot changes no row, when it is one that only rearranges rows: a
 *                  `replace` (Iceberg's or maintain's compactions) with no delete committed while it
 *                  ran, or eqdelete's resolve, which restates deletes already applied; its files
 *                  are then not read at all
 * @param byKeys    when only its equality deletes, all on the same key columns, can change rows
 *                  of `touched` (no data file removed, no position delete or deletion vector on
 *                  one): those deletes, so its deleted rows are among the rows of those keys
 * @param everyParentFile whether `touched` is every data file of its parent (as scattered keys
 *                  make it): a read of them needs no `_file` restriction
 */
final case class SnapshotChangeFiles(snapshot: Snapshot, added: Set[String], touched: Set[String], unchanged: Option[String],
    byKeys: Option[SnapshotEqualityDeletes] = None, everyParentFile: Boolean = false)

/**
 * A snapshot's equality delete files on one set of key columns (field ids, ascending), and the
 * specs of its parent's data files (what says whether a partition-scoped delete can match a key
 * anywhere else than in its own partition).
 */
final case class SnapshotEqualityDeletes(equalityIds: Seq[Int], files: Seq[DeleteFile], parentSpecs: Set[Int] = Set.empty) {
  def records: Long = files.map(_.recordCount()).sum
}

object SnapshotChangeFiles {

  def of(table: Table, snapshot: Snapshot): SnapshotChangeFiles = unchangedBecause(table, snapshot) match {
    case Some(why) => SnapshotChangeFiles(snapshot, Set.empty, Set.empty, Some(why))
    case None =>
      val io = table.io()
      val added = snapshot.addedDataFiles(io).asScala.map(_.location()).toSet
      val removed = snapshot.removedDataFiles(io).asScala.map(_.location()).toSet
      val deletes = snapshot.addedDeleteFiles(io).asScala.toVector
      // A deletion vector or file-scoped delete names its file; any other delete file applies by partition.
      val (named, scoped) = deletes.partition(d => d.content() == FileContent.POSITION_DELETES &&
        IcebergInternals.referencedDataFile(d).isDefined)
      val (equality, positional) = scoped.partition(_.content() == FileContent.EQUALITY_DELETES)
      // With the stats of the equality deletes' key columns, which pair them with the files (DeleteKeyBounds).
      val keyIds = equality.flatMap(_.equalityFieldIds().asScala.map(_.intValue)).toSet
      val parentFiles = if (scoped.isEmpty) Nil else Option(snapshot.parentId()).toSeq.flatMap(p => LiveDataFiles.at(table, p.longValue(), keyIds))
      // An equality delete touches the files of its partition whose key bounds it can match; a
      // position delete file those of its partition its rows' paths can name.
      val bounds = new DeleteKeyBounds(table)
      def touchedBy(deletes: Seq[DeleteFile], mayMatch: (DeleteFile, DataFile) => Boolean): Set[String] =
        parentFiles.filter(file => deletes.exists(delete => appliesTo(table, delete, file) && mayMatch(delete, file)))
          .map(_.location()).toSet
      val byPositions = removed ++ named.flatMap(IcebergInternals.referencedDataFile) ++ touchedBy(positional, AddedFileTasks.mayName) -- added
      val touched = byPositions ++ touchedBy(equality, bounds.mayMatch) -- added
      val keys = equality.map(_.equalityFieldIds().asScala.map(_.intValue).toSeq.sorted).distinct match {
        case Seq(ids) if byPositions.isEmpty && touched.nonEmpty =>
          Some(SnapshotEqualityDeletes(ids, equality, parentFiles.map(_.specId().intValue).toSet))
        case _ => None
      }
      SnapshotChangeFiles(snapshot, added, touched, None, keys,
        everyParentFile = parentFiles.nonEmpty && touched == parentFiles.map(_.location()).toSet)
  }

  private def unchangedBecause(table: Table, snapshot: Snapshot): Option[String] =
    if (snapshot.operation() == DataOperations.REPLACE) {
      if (deletesSinceItStarted(table, snapshot)) None else Some("a replace (a compaction) changes no row")
    } else if (Option(snapshot.summary()).exists(_.containsKey(ResolveEqualityDeletes.SummaryKey))) {
      Some("eqdelete's resolve restates rows already deleted")
    } else None

  /**
   * Whether deletes were committed while the rewrite `snapshot` ran, when it gave its files the data
   * sequence number of the snapshot it started from (Iceberg's `use-starting-sequence-number`, the
   * default): those deletes apply to the rewritten rows by their sequence number, and may apply to
   * them otherwise than to the originals (a partition-scoped delete in another spec than the
   * originals'), so the rewrite can remove or restore a row, and is then read as any snapshot is.
   * Without such deletes its rows are its originals' rows exactly: what it read at its start, with
   * every delete older than its files' sequence number, which no longer applies. From snapshot
   * summaries (a summary without the counts counts as deletes).
   */
  private def deletesSinceItStarted(table: Table, snapshot: Snapshot): Boolean = {
    val started = snapshot.addedDataFiles(table.io()).asScala.flatMap(f => Option(f.dataSequenceNumber())).map(_.longValue)
    started.reduceOption(_ min _).exists { start =>
      start < snapshot.sequenceNumber() &&
        ChangeRange.ancestors(table, snapshot).drop(1).takeWhile(_.sequenceNumber() > start).exists(addedDeletes)
    }
  }

  private def addedDeletes(snapshot: Snapshot): Boolean = Option(snapshot.summary()) match {
    case Some(summary) if summary.containsKey("added-delete-files") || summary.containsKey("total-delete-files") =>
      Seq("added-delete-files", "added-dvs").exists(k => Option(summary.get(k)).exists(v => scala.util.Try(v.toLong).getOrElse(1L) > 0))
    case _ => true
  }

  /** Whether `delete` applies to `file` by partition: the same spec and partition, or any file for a global delete. */
  private def appliesTo(table: Table, delete: DeleteFile, file: DataFile): Boolean = {
    val spec = table.specs().get(delete.specId())
    spec.isUnpartitioned ||
      DeletePlanner.partitionOf(spec, delete) == DeletePlanner.partitionOf(table.specs().get(file.specId()), file)
  }
}
