package eqdelete.rules

import eqdelete.scan.{EqualityDeleteFreeTable, FileSelection}

import org.apache.iceberg.spark.source.SparkTable
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.execution.datasources.v2.{DataSourceV2Relation, DataSourceV2ScanRelation}

/** The decisions recorded in a plan (subqueries included), one per Iceberg scan looked at. */
object Decisions {
  def of(plan: LogicalPlan): Seq[Decision] = plan.collectWithSubqueries {
    case relation: DataSourceV2Relation => fromRelation(relation)
    case scan: DataSourceV2ScanRelation => fromRelation(scan.relation)
  }.flatten

  private def fromRelation(relation: DataSourceV2Relation): Option[Decision] =
    relation.getTagValue(Decision.NativeTag).orElse(relation.table match {
      case table: SparkTable => table.table() match {
        // Both branches of a rewrite carry the decision; count it once.
        case rewritten: EqualityDeleteFreeTable if rewritten.selection == FileSelection.EqualityDeletesRemoved =>
          Some(rewritten.decision)
        case _ => None
      }
      case _ => None
    })
}
