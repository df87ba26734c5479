package eqdelete.scan

import org.apache.iceberg.{TableMetadata, TableOperations}
import org.apache.iceberg.io.{FileIO, LocationProvider}

/**
 * Read-only operations frozen on one `TableMetadata`: the rewritten scans see exactly the
 * snapshots, schemas and specs the delete planning saw, even if the table moves on meanwhile.
 */
final class PinnedTableOperations(metadata: TableMetadata, fileIO: FileIO, locations: LocationProvider)
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
