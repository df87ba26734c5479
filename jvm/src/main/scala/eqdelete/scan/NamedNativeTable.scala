package eqdelete.scan

import java.util

import eqdelete.explain.{CarriesDecision, Decision}

import org.apache.spark.sql.connector.catalog.{MetadataColumn, SupportsMetadataColumns, SupportsRead, Table, TableCapability}
import org.apache.spark.sql.connector.expressions.Transform
import org.apache.spark.sql.connector.read.ScanBuilder
import org.apache.spark.sql.eqdelete.compat.IcebergSparkTables
import org.apache.spark.sql.types.StructType
import org.apache.spark.sql.util.CaseInsensitiveStringMap

/**
 * Iceberg's own table, for a read eqdelete does not model (an incremental read, `_deleted`, an
 * option it does not know): every call goes to Iceberg's Spark table as it was loaded, so the
 * rows are exactly Iceberg's; only the name carries the decision, so EXPLAIN says why.
 */
final case class NamedNativeTable(iceberg: Table, decision: Decision)
  extends Table with SupportsRead with SupportsMetadataColumns with CarriesDecision {

  def repeatsDecision: Boolean = false

  override def name(): String = s"${iceberg.name()} [${decision.describe}]"
  override def schema(): StructType = IcebergSparkTables.schema(iceberg)
  override def partitioning(): Array[Transform] = iceberg.partitioning()
  override def properties(): util.Map[String, String] = iceberg.properties()
  override def capabilities(): util.Set[TableCapability] = iceberg.capabilities()
  override def newScanBuilder(options: CaseInsensitiveStringMap): ScanBuilder = readable.newScanBuilder(options)
  override def metadataColumns(): Array[MetadataColumn] = withMetadataColumns.metadataColumns()

  // Iceberg's Spark table is both; the rule names no other table.
  private def readable = iceberg.asInstanceOf[SupportsRead]
  private def withMetadataColumns = iceberg.asInstanceOf[SupportsMetadataColumns]
}
