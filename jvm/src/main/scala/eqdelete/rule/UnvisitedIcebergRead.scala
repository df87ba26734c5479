package eqdelete.rule

import eqdelete.explain.Decision
import eqdelete.scan.FileSelectingTable

import org.apache.iceberg.{BaseTable, Table}
import org.apache.iceberg.spark.source.SparkTable
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.eqdelete.compat.IcebergSparkShim
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation

/**
 * Matches a batch read of an Iceberg table eqdelete has not looked at yet: a relation over
 * Iceberg's own `SparkTable` (so never the row-level-operation table DELETE, UPDATE and
 * MERGE read their target through, and never a scan eqdelete already rewrote or named). Whether
 * its files carry equality deletes is the delete planning's question, not this one's.
 */
object UnvisitedIcebergRead {
  /** The relation, Iceberg's SparkTable, the Iceberg table and the snapshot the scan reads. */
  def unapply(plan: LogicalPlan): Option[(DataSourceV2Relation, SparkTable, Table, Long)] = plan match {
    // By type, not by its fields: their number differs between Spark lines.
    case relation: DataSourceV2Relation => relation.table match {
      case table: SparkTable
          if table.getClass == classOf[SparkTable] &&
            !table.table().isInstanceOf[FileSelectingTable] &&
            table.table().isInstanceOf[BaseTable] &&
            relation.getTagValue(Decision.NativeTag).isEmpty =>
        IcebergSparkShim.snapshotId(table).map(snapshot => (relation, table, table.table(), snapshot))
      case _ => None
    }
    case _ => None
  }
}
