package org.apache.spark.sql.eqdelete.compat

import scala.util.Try

import org.apache.iceberg.{CachingCatalog, Schema, Table}
import org.apache.iceberg.catalog.Catalog
import org.apache.iceberg.exceptions.NoSuchTableException
import org.apache.iceberg.spark.{Spark3Util, SparkSchemaUtil}
import org.apache.iceberg.spark.source.SparkTable
import org.apache.iceberg.types.Type
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.connector.catalog.{Table => SparkCatalogTable}
import org.apache.spark.sql.types.{DataType, StructType}

/**
 * Iceberg's Spark module (`SparkTable`, `Spark3Util`, `SparkSchemaUtil`): public Java classes,
 * not promised API. The rest of eqdelete sees Iceberg's Spark table only as Spark's own
 * connector `Table`, and asks here what Iceberg table and snapshot stand behind it.
 */
object IcebergSparkTables {
  /** The Iceberg table behind `table` when it is Iceberg's Spark table or a subclass of it. */
  def icebergTable(table: SparkCatalogTable): Option[Table] = table match {
    case iceberg: SparkTable => Some(iceberg.table())
    case _ => None
  }

  /**
   * The Iceberg table behind `table` when it is exactly Iceberg's Spark table: not the
   * subclass DELETE, UPDATE and MERGE read their target through.
   */
  def plainIcebergTable(table: SparkCatalogTable): Option[Table] = table match {
    case iceberg: SparkTable if iceberg.getClass == classOf[SparkTable] => Some(iceberg.table())
    case _ => None
  }

  /** The snapshot a scan of Iceberg's Spark table `table` reads; None for a table without snapshots or not Iceberg's. */
  def snapshotId(table: SparkCatalogTable): Option[Long] = table match {
    case iceberg: SparkTable => IcebergSparkShim.snapshotId(iceberg)
    case _ => None
  }

  /** The schema Iceberg's Spark table `table` shows Spark (Spark deprecates asking a `Table` for it; Iceberg's answers). */
  def schema(table: SparkCatalogTable): StructType = table match {
    case iceberg: SparkTable => iceberg.schema()
    case other => throw new IllegalArgumentException(s"${other.name()} is not Iceberg's Spark table")
  }

  /** The branch Iceberg's Spark table `table` reads, if it pins one. */
  def branch(table: SparkCatalogTable): Option[String] = table match {
    case iceberg: SparkTable => Option(iceberg.branch())
    case _ => None
  }

  /** The ways to show `table` to Spark: at `branch`, at its current snapshot, at `snapshotId`. */
  def views(table: Table, branch: Option[String], snapshotId: Long): Seq[() => SparkCatalogTable] =
    IcebergSparkShim.views(table, branch, snapshotId)

  /** The Iceberg table Spark names `name` in `session`'s catalogs. */
  def load(session: SparkSession, name: String): Table = Spark3Util.loadIcebergTable(session, name)

  /**
   * The table `name` as its newest metadata has it: its properties, snapshot and schema. Iceberg's
   * Spark catalog caches loaded tables (`cache-enabled`), and a process that keeps looking at a
   * table, as the service does, keeps its cache entry from ever expiring: without the refresh it
   * would never see another process's commits, a fixed table property among them.
   */
  def current(session: SparkSession, name: String): Table = {
    val table = load(session, name)
    table.refresh()
    table
  }

  /**
   * The table `name` as its newest metadata has it, as an instance of its own that the catalog's
   * cache never sees: it is neither read from the cache nor put into it, so a thread beside the
   * session's queries (a stream's source) cannot leave the cache holding a table older than one the
   * session committed through. Iceberg's `CachingCatalog` keeps the catalog it wraps in a private
   * field, read here; a catalog that caches nothing loads a new instance anyway.
   */
  def uncached(session: SparkSession, name: String): Table = {
    val resolved = Spark3Util.catalogAndIdentifier(session, name)
    val identifier = Spark3Util.identifierToTableIdentifier(resolved.identifier())
    val catalog = Spark3Util.loadIcebergCatalog(session, resolved.catalog().name())
    val loaded = (catalog match {
      case caching: CachingCatalog => wrapped(caching)
      case other => Some(other)
    }).map(c => try Some(c.loadTable(identifier)) catch { case _: NoSuchTableException => None })
    loaded.getOrElse {
      throw new IllegalStateException(s"eqdelete: cannot load $name past its catalog's cache (Iceberg's CachingCatalog " +
        "no longer keeps the catalog it wraps where this release of eqdelete looks)")
    }.getOrElse(current(session, name))  // a name only Iceberg's Spark catalog resolves (a path, a branch selector)
  }

  private def wrapped(caching: CachingCatalog): Option[Catalog] =
    Try { val f = classOf[CachingCatalog].getDeclaredField("catalog"); f.setAccessible(true); f.get(caching) }.toOption
      .collect { case c: Catalog => c }

  /**
   * Iceberg's Spark table over `table` pinned at `snapshotId` (a time-travel view, never one that
   * reads the instance's current snapshot when it runs), for a read of that snapshot that names no catalog.
   */
  def at(table: Table, snapshotId: Long): SparkCatalogTable = {
    val pinned = IcebergSparkShim.views(table, None, snapshotId).last.apply()  // each shim's last view travels to `snapshotId`
    if (!IcebergSparkShim.snapshotId(pinned).contains(snapshotId)) {
      throw new IllegalStateException(s"eqdelete: cannot pin ${table.name()} at snapshot $snapshotId")
    }
    pinned
  }

  /** The Spark type Iceberg's Spark reader reads `icebergType` as. */
  def sparkType(icebergType: Type): DataType = SparkSchemaUtil.convert(icebergType)

  /** The Spark schema Iceberg's Spark reader reads `schema` as. */
  def sparkSchema(schema: Schema): StructType = SparkSchemaUtil.convert(schema)
}
