package org.apache.spark.sql.eqdelete.compat

import java.util

import org.apache.iceberg.{BaseTable, BatchScan, Table, TableMetadata, TableOperations, TableProperties}
import org.apache.iceberg.io.{FileIO, LocationProvider}

/**
 * An Iceberg table frozen on the metadata version `original` had when it was pinned, read-only,
 * whose batch scans a subclass may narrow: Iceberg's Spark table reads it as it reads `original`,
 * with Iceberg's own readers. It subclasses Iceberg's `BaseTable` (core, not API), which is why
 * it lives here. `label` is the name Spark shows, so EXPLAIN can say what was done to the read.
 */
abstract class PinnedIcebergTable(original: Table, label: String)
  extends BaseTable(PinnedIcebergTable.operations(original), label) {

  // Distributed planning would bypass newBatchScan; a subclass's scan must see every task.
  override def properties(): util.Map[String, String] = {
    val props = new util.HashMap[String, String](super.properties())
    props.put(TableProperties.DATA_PLANNING_MODE, "local")
    props.put(TableProperties.DELETE_PLANNING_MODE, "local")
    props
  }

  /** The scan `original` would plan at the pinned metadata. */
  protected def icebergBatchScan(): BatchScan = super.newBatchScan()
}

object PinnedIcebergTable {
  /** Whether `table` can be pinned: a catalog's table, not a metadata table or another wrapper. */
  def canPin(table: Table): Boolean = table.isInstanceOf[BaseTable]

  private def operations(original: Table): TableOperations = original match {
    case base: BaseTable => new PinnedOperations(base.operations().current(), original.io(), original.locationProvider())
    case other => throw new IllegalArgumentException(s"eqdelete cannot pin ${other.name()} (${other.getClass.getName})")
  }

  /**
   * Read-only operations frozen on one `TableMetadata`: the rewritten scans see exactly the
   * snapshots, schemas and specs the delete planning saw, even if the table moves on meanwhile.
   */
  private final class PinnedOperations(metadata: TableMetadata, fileIO: FileIO, locations: LocationProvider)
    extends TableOperations {

    override def current(): TableMetadata = metadata
    override def refresh(): TableMetadata = metadata
    override def commit(base: TableMetadata, updated: TableMetadata): Unit =
      throw new UnsupportedOperationException("eqdelete's rewritten scans are read-only")
    override def io(): FileIO = fileIO
    override def metadataFileLocation(fileName: String): String =
      throw new UnsupportedOperationException("eqdelete's rewritten scans are read-only")
    override def locationProvider(): LocationProvider = locations
  }
}
