package eqdelete.filter

import eqdelete.cost.ScanRewritePlan
import eqdelete.explain.CoveredRows
import eqdelete.deleteindex.build.{BuildDeleteKeyIndex, DeleteKeyIndexSource}
import eqdelete.scan.StrippedScan

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.expressions.{Expression, Not, Or, ScalarSubquery}
import org.apache.spark.sql.catalyst.plans.logical.{Filter, LogicalPlan, Project}
import org.apache.spark.sql.execution.metric.SQLMetrics

/**
 * filter: each equality set's delete rows become an index, built during execution by a scalar
 * subquery (kept across queries by [[DeleteIndexCache]]) and broadcast, and the scan is
 * filtered with a set-membership predicate:
 * {{{
 *   Project(columns)
 *     Filter(NOT (eqdelete_deleted(keys of set 1; index subquery 1) OR ...))
 *       scan
 *   subquery i: BuildDeleteKeyIndex(set i)
 * }}}
 * The query's own filters land beside it, where Spark pushes them into Iceberg's scan.
 */
object ApplyDeletesWithFilter {

  /** `covered`: per covered set (by its equality ids), where its index build counts the rows it drops. */
  def build(session: SparkSession, scan: StrippedScan, plan: ScanRewritePlan.Filter,
      covered: Map[Seq[Int], CoveredRows]): LogicalPlan = {
    val matches = plan.indexes.map { indexed =>
      // Counted by the predicate in the scan's tasks, shown on the index's node: the rows it removed.
      val removed = SQLMetrics.createMetric(session.sparkContext, "data rows removed by the index")
      val source = DeleteKeyIndexSource(indexed, scan.table.io(), scan.readSchema, covered.get(indexed.set.equalityIds), Some(removed))
      EqualityDeleteMatch(scan.keyColumns(indexed.set), scan.scope.child, scan.sequence.child,
        ScalarSubquery(BuildDeleteKeyIndex(source)), Some(removed), lookUpInBatches = indexed.hashed)
    }
    val deleted = matches.reduce[Expression](Or(_, _))
    Project(scan.columns, Filter(Not(deleted), scan.source))
  }
}
