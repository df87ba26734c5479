package eqdelete.maintain

import eqdelete.planning.LiveDeleteFiles

import org.apache.iceberg.{ContentFile, DeleteFile, Table}
import org.apache.spark.sql.eqdelete.compat.IcebergInternals

/**
 * The most position delete files (deletion vectors aside) a reader of one data file opens in a
 * snapshot: the files of its partition that may cover several data files, plus those naming it.
 * Each resolve on format v2 adds a partition-wide file per partition it touches. Counting files
 * per partition instead would see a pile-up right after a compaction, which leaves a file per
 * data file, each opened by one reader only.
 */
object PositionDeletePileUp {
  /** A partition of the table, as Iceberg's delete index keys position deletes: the spec and the partition's path. */
  type PartitionKey = (Int, String)

  def partitionOf(table: Table, file: ContentFile[_]): PartitionKey =
    (file.specId(), table.specs().get(file.specId()).partitionToPath(file.partition()))

  def mostFilesPerDataFile(table: Table, snapshotId: Long): Int =
    byPartition(table, snapshotId).values.map(filesPerDataFile).foldLeft(0)(math.max)

  /** The snapshot's position delete files (deletion vectors aside), by partition. */
  def byPartition(table: Table, snapshotId: Long): Map[PartitionKey, Seq[DeleteFile]] =
    LiveDeleteFiles.positionDeletes(table, snapshotId).filterNot(IcebergInternals.isDeletionVector).groupBy(partitionOf(table, _))

  /** The most of one partition's position delete files a reader of one of its data files opens. */
  def filesPerDataFile(inPartition: Seq[DeleteFile]): Int = {
    val (scoped, wide) = inPartition.partition(f => IcebergInternals.referencedDataFile(f).isDefined)
    val mostScoped = if (scoped.isEmpty) 0 else scoped.groupBy(IcebergInternals.referencedDataFile).values.map(_.size).max
    wide.size + mostScoped
  }
}
