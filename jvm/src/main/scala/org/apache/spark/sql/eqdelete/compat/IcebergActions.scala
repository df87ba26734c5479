package org.apache.spark.sql.eqdelete.compat

import org.apache.iceberg.Table
import org.apache.iceberg.spark.actions.SparkActions
import org.apache.spark.sql.SparkSession

/** Iceberg's Spark actions (`SparkActions`, Iceberg's Spark module): what its table maintenance procedures run. */
object IcebergActions {

  /** What a rewrite of data files did. */
  final case class RewrittenData(rewritten: Int, added: Int, rewrittenBytes: Long)

  /**
   * Rewrites the data files whose deletes scoped to them (deletion vectors, file-scoped position
   * deletes) remove at least `deadRatio` of their rows, and only those (Iceberg's
   * `rewrite_data_files` with its `delete-ratio-threshold`, every size accepted and no delete
   * count a reason), at most `maxFiles` of them. One commit, validated against concurrent ones,
   * whose snapshot carries `marker` (Iceberg's removal of dangling deletes would be a second
   * commit: on v3 the rewrite drops the rewritten files' deletion vectors itself, on v2 the
   * position delete compaction drops the deletes of data files gone).
   */
  def rewriteDeadData(session: SparkSession, table: Table, deadRatio: Double, maxFiles: Option[Int],
      marker: (String, String)): RewrittenData = {
    val action = SparkActions.get(session).rewriteDataFiles(table)
      .option("delete-ratio-threshold", deadRatio.toString)
      .option("min-file-size-bytes", "0")
      .option("max-file-size-bytes", Long.MaxValue.toString)
      .option("delete-file-threshold", Int.MaxValue.toString)
      .snapshotProperty(marker._1, marker._2)
    val result = maxFiles.fold(action)(n => action.option("max-files-to-rewrite", n.toString)).execute()
    RewrittenData(result.rewrittenDataFilesCount(), result.addedDataFilesCount(), result.rewrittenBytesCount())
  }
}
