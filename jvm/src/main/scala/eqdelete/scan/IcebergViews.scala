package eqdelete.scan

import scala.util.Try

import eqdelete.planning.DeclinedException

import org.apache.iceberg.Table
import org.apache.iceberg.spark.source.SparkTable
import org.apache.spark.sql.eqdelete.compat.IcebergSparkShim

/** Iceberg's SparkTable views over eqdelete's tables. */
object IcebergViews {
  /**
   * A SparkTable over `wrapper` showing exactly the schema `original` shows, at the snapshot the
   * delete planning used. The snapshot is compared as resolved, not as the tables store it:
   * Iceberg's 3.5/4.0 modules store none for a current-snapshot read, so a commit landing
   * between planning and this check would otherwise go unnoticed.
   */
  def sameView(original: SparkTable, planned: Long, wrapper: Table): SparkTable = {
    val candidates = IcebergSparkShim.views(wrapper, Option(original.branch()), planned)
    candidates.iterator.flatMap(c => Try(c()).toOption).find { candidate =>
      IcebergSparkShim.snapshotId(candidate).contains(planned) && candidate.schema() == original.schema()
    }.getOrElse(throw DeclinedException("cannot reproduce the scan's snapshot and schema"))
  }
}
