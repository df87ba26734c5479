package eqdelete.scan

import java.util

import eqdelete.explain.{CarriesDecision, Decision}

import org.apache.iceberg.spark.source.SparkTable
import org.apache.spark.sql.connector.catalog.{MetadataColumn, SupportsMetadataColumns, SupportsRead, Table, TableCapability}
import org.apache.spark.sql.connector.expressions.Transform
import org.apache.spark.sql.connector.read.ScanBuilder
import org.apache.spark.sql.types.StructType
import org.apache.spark.sql.util.CaseInsensitiveStringMap

/**
 * Iceberg's own table, for a read eqdelete does not model (an incremental read, `_deleted`, an
 * option it does not know): every call goes to Iceberg's `SparkTable` as it was loaded, so the
 * rows are exactly Iceberg's; only the name carries the decision, so EXPLAIN says why.
 */
final case class NamedNativeTable(iceberg: SparkTable, decision: Decision)
  extends Table with SupportsRead with SupportsMetadataColumns with CarriesDecision {

  def repeatsDecision: Boolean = false

  override def name(): String = s"${iceberg.name()} [${decision.describe}]"
  override def schema(): StructType = iceberg.schema()
  override def partitioning(): Array[Transform] = iceberg.partitioning()
  override def properties(): util.Map[String, String] = iceberg.properties()
  override def capabilities(): util.Set[TableCapability] = iceberg.capabilities()
  override def newScanBuilder(options: CaseInsensitiveStringMap): ScanBuilder = iceberg.newScanBuilder(options)
  override def metadataColumns(): Array[MetadataColumn] = iceberg.metadataColumns()
}
