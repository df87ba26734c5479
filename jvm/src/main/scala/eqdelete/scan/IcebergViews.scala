package eqdelete.scan

import scala.util.Try

import eqdelete.planning.DeclinedException

import org.apache.iceberg.Table
import org.apache.spark.sql.connector.catalog.{Table => SparkCatalogTable}
import org.apache.spark.sql.eqdelete.compat.IcebergSparkTables

/** Iceberg's Spark table views over eqdelete's tables. */
object IcebergViews {
  /**
   * Iceberg's Spark table over `wrapper` showing exactly the schema `original` (Iceberg's Spark
   * table) shows, at the snapshot the delete planning used. The snapshot is compared as
   * resolved, not as the tables store it: Iceberg's 3.5/4.0 modules store none for a
   * current-snapshot read, so a commit landing between planning and this check would otherwise
   * go unnoticed.
   */
  def sameView(original: SparkCatalogTable, planned: Long, wrapper: Table): SparkCatalogTable = {
    val candidates = IcebergSparkTables.views(wrapper, IcebergSparkTables.branch(original), planned)
    candidates.iterator.flatMap(c => Try(c()).toOption).find { candidate =>
      IcebergSparkTables.snapshotId(candidate).contains(planned) && IcebergSparkTables.schema(candidate) == IcebergSparkTables.schema(original)
    }.getOrElse(throw DeclinedException("cannot reproduce the scan's snapshot and schema"))
  }
}
