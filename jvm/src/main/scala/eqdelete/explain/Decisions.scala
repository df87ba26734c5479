package eqdelete.explain

import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.eqdelete.compat.IcebergSparkTables
import org.apache.spark.sql.execution.datasources.v2.{DataSourceV2Relation, DataSourceV2ScanRelation}

/**
 * The decisions recorded in a plan (subqueries included), one per Iceberg scan looked at.
 * Copies of a scan that Spark adds (runtime filters, dynamic pruning) share its decision
 * object and are counted once; two scans of one table (a self-join) are two decisions.
 */
object Decisions {
  def of(plan: LogicalPlan): Seq[Decision] = {
    val seen = java.util.Collections.newSetFromMap(new java.util.IdentityHashMap[Decision, java.lang.Boolean]())
    plan.collectWithSubqueries {
      case relation: DataSourceV2Relation => fromRelation(relation)
      case scan: DataSourceV2ScanRelation => fromRelation(scan.relation)
    }.flatten.filter(seen.add)
  }

  private def fromRelation(relation: DataSourceV2Relation): Option[Decision] =
    relation.getTagValue(Decision.NativeTag).orElse(relation.table match {
      case named: CarriesDecision if !named.repeatsDecision => Some(named.decision)
      case table => IcebergSparkTables.icebergTable(table).collect {
        case carrier: CarriesDecision if !carrier.repeatsDecision => carrier.decision
      }
    })
}
