package eqdelete.rules

import eqdelete.expressions.EqualityDeleteMatch
import eqdelete.planning.DeleteKeyIndex

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.expressions.{Expression, Not, Or}
import org.apache.spark.sql.catalyst.plans.logical.{Filter, LogicalPlan, Project}

/**
 * filter: reads every delete row once (Spark tasks, keys collected to the driver) and compiles each equality set into a
 * set-membership predicate on the scan:
 * {{{
 *   Project(columns) -> Filter(NOT (eqdelete_deleted(keys of set 1) OR ...)) -> scan
 * }}}
 * The query's own filters land beside it, where Spark pushes them into Iceberg's scan.
 */
object FilterPlanBuilder {

  /** Builds the plan, reading the delete rows now (Spark tasks in parallel, keys to the driver). */
  def build(session: SparkSession, scan: DeletedRowsScan): LogicalPlan = {
    val matches = scan.plan.deleteSets.map { set =>
      val index = new DeleteKeyIndex(set.keyColumns.size)
      scan.deleteRows(session, set, set.files).collect().foreach { case (keys, scope, seq) =>
        index.add(scope, keys, seq)
      }
      EqualityDeleteMatch(scan.keyColumns(set), scan.scope.child, scan.sequence.child, index)
    }
    val deleted = matches.reduce[Expression](Or(_, _))
    Project(scan.columns, Filter(Not(deleted), scan.relation))
  }
}
