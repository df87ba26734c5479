package org.apache.spark.sql.eqdelete.compat

import org.apache.iceberg.Table
import org.apache.iceberg.spark.actions.SparkActions
import org.apache.spark.sql.SparkSession

/** Iceberg's Spark actions (`SparkActions`, Iceberg's Spark module): what its table maintenance procedures run. */
object IcebergActions {

  /** What a rewrite of position delete files did. */
  final case class RewrittenDeletes(rewritten: Int, added: Int)

  /**
   * Rewrites the position delete files of each partition holding at least `minInputFiles` of
   * them into fewer (Iceberg's `rewrite_position_delete_files`, which also drops deletes of data
   * files gone), in one commit validated against concurrent ones, whose snapshot carries
   * `marker` in its summary.
   */
  def rewritePositionDeletes(session: SparkSession, table: Table, minInputFiles: Long,
      marker: (String, String)): RewrittenDeletes = {
    val result = SparkActions.get(session).rewritePositionDeletes(table)
      .option("min-input-files", minInputFiles.toString)
      .snapshotProperty(marker._1, marker._2)
      .execute()
    RewrittenDeletes(result.rewrittenDeleteFilesCount(), result.addedDeleteFilesCount())
  }
}
