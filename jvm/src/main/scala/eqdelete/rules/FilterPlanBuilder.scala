package eqdelete.rules

import eqdelete.expressions.EqualityDeleteMatch

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.expressions.{Expression, Not, Or}
import org.apache.spark.sql.catalyst.plans.logical.{Filter, LogicalPlan, Project}

/**
 * filter: reads every delete row once (Spark tasks, keys collected to the driver), indexes each
 * equality set (kept across queries by [[DeleteIndexCache]]), broadcasts it, and filters the
 * scan with a set-membership predicate:
 * {{{
 *   Project(columns) -> Filter(NOT (eqdelete_deleted(keys of set 1) OR ...)) -> scan
 * }}}
 * The query's own filters land beside it, where Spark pushes them into Iceberg's scan.
 */
object FilterPlanBuilder {

  def build(session: SparkSession, scan: DeletedRowsScan): LogicalPlan = {
    val matches = scan.plan.deleteSets.map { set =>
      EqualityDeleteMatch(scan.keyColumns(set), scan.scope.child, scan.sequence.child,
        DeleteIndexCache.getOrBuild(session, scan, set))
    }
    val deleted = matches.reduce[Expression](Or(_, _))
    Project(scan.columns, Filter(Not(deleted), scan.relation))
  }
}
