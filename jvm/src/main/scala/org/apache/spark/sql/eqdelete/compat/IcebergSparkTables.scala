package org.apache.spark.sql.eqdelete.compat

import org.apache.iceberg.{Schema, Table}
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
   * The table `name` as its newest metadata has it, as a new instance: the catalog's cache entry is
   * dropped and the table loaded again, so the catalog caches the new one for later reads. Unlike
   * [[current]] it never refreshes the cached instance in place, under a query of the same session
   * that resolved it (Iceberg's scan builder then fails: "Failed to enforce scan consistency"). For
   * what runs beside a user's queries, as a stream's source does.
   */
  def reloaded(session: SparkSession, name: String): Table = {
    val resolved = Spark3Util.catalogAndIdentifier(session, name)
    resolved.catalog() match {
      case catalog: org.apache.spark.sql.connector.catalog.TableCatalog => catalog.invalidateTable(resolved.identifier())
      case _ =>
    }
    load(session, name)
  }

  /** The Spark type Iceberg's Spark reader reads `icebergType` as. */
  def sparkType(icebergType: Type): DataType = SparkSchemaUtil.convert(icebergType)

  /** The Spark schema Iceberg's Spark reader reads `schema` as. */
  def sparkSchema(schema: Schema): StructType = SparkSchemaUtil.convert(schema)
}
