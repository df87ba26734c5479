package eqdelete.maintain

import eqdelete.planning.LiveDeleteFiles

import org.apache.iceberg.Table
import org.apache.spark.sql.eqdelete.compat.IcebergInternals

/**
 * The most position delete files (deletion vectors aside) a reader of one data file opens in a
 * snapshot: the files of its partition that may cover several data files, plus those naming it.
 * Each resolve on format v2 adds a partition-wide file per partition it touches. Counting files
 * per partition instead would see a pile-up right after a compaction: Iceberg's
 * rewrite_position_delete_files leaves a file per data file, each opened by one reader only.
 */
object PositionDeletePileUp {
  def mostFilesPerDataFile(table: Table, snapshotId: Long): Int = {
    val files = LiveDeleteFiles.positionDeletes(table, snapshotId).filterNot(IcebergInternals.isDeletionVector)
    val byPartition = files.groupBy(f => (f.specId(), table.specs().get(f.specId()).partitionToPath(f.partition())))
    byPartition.values.map { inPartition =>
      val (scoped, wide) = inPartition.partition(f => IcebergInternals.referencedDataFile(f).isDefined)
      val mostScoped = if (scoped.isEmpty) 0 else scoped.groupBy(IcebergInternals.referencedDataFile).values.map(_.size).max
      wide.size + mostScoped
    }.foldLeft(0)(math.max)
  }
}
