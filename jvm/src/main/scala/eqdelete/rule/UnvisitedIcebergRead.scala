package eqdelete.rule

import eqdelete.explain.Decision
import eqdelete.scan.FileSelectingTable

import org.apache.iceberg.Table
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.eqdelete.compat.{IcebergSparkTables, PinnedIcebergTable}
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation

/**
 * Matches a batch read of an Iceberg table eqdelete has not looked at yet: a relation over
 * Iceberg's own Spark table (so never the row-level-operation table DELETE, UPDATE and
 * MERGE read their target through, and never a scan eqdelete already rewrote or named). Whether
 * its files carry equality deletes is the delete planning's question, not this one's.
 */
object UnvisitedIcebergRead {
  /** The relation, the Iceberg table and the snapshot the scan reads. */
  def unapply(plan: LogicalPlan): Option[(DataSourceV2Relation, Table, Long)] = plan match {
    // By type, not by its fields: their number differs between Spark lines.
    case relation: DataSourceV2Relation if relation.getTagValue(Decision.NativeTag).isEmpty =>
      IcebergSparkTables.plainIcebergTable(relation.table)
        .filter(table => !table.isInstanceOf[FileSelectingTable] && PinnedIcebergTable.canPin(table))
        .flatMap(table => IcebergSparkTables.snapshotId(relation.table).map(snapshot => (relation, table, snapshot)))
    case _ => None
  }
}
