package eqdelete.rules

import eqdelete.scan.EqualityDeleteFreeTable

import org.apache.iceberg.{BaseTable, Table}
import org.apache.iceberg.spark.source.SparkTable
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation

/**
 * Matches a batch read of an Iceberg table eqdelete has not looked at yet: a relation over
 * Iceberg's own `SparkTable` (so never the row-level-operation table DELETE, UPDATE and
 * MERGE read their target through, and never a scan eqdelete already rewrote).
 */
object IcebergScanWithEqDeletes {
  def unapply(plan: LogicalPlan): Option[(DataSourceV2Relation, SparkTable, Table)] = plan match {
    case relation @ DataSourceV2Relation(table: SparkTable, _, _, _, _, _)
        if table.getClass == classOf[SparkTable] &&
          !table.table().isInstanceOf[EqualityDeleteFreeTable] &&
          table.table().isInstanceOf[BaseTable] &&
          relation.getTagValue(Decision.NativeTag).isEmpty &&
          table.snapshotId() != null =>
      Some((relation, table, table.table()))
    case _ => None
  }
}
