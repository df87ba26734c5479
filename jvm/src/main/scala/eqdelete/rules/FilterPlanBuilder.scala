package eqdelete.rules

import eqdelete.expressions.EqualityDeleteMatch
import eqdelete.planning.DeleteKeyIndex

import org.apache.spark.sql.catalyst.expressions.{Not, Or}
import org.apache.spark.sql.catalyst.plans.logical.{Filter, LogicalPlan, Project}

/**
 * filter: reads every delete row once on the driver and compiles each equality set into a
 * set-membership predicate on the scan:
 * {{{
 *   Project(columns) -> Filter(NOT (eqdelete_deleted(keys of set 1) OR ...)) -> scan
 * }}}
 * The query's own filters land beside it, where Spark pushes them into Iceberg's scan.
 */
object FilterPlanBuilder {

  /** Builds the plan; also returns the number of delete rows read. */
  def build(scan: DeletedRowsScan): (LogicalPlan, Long) = {
    var rowsRead = 0L
    val matches = scan.plan.deleteSets.map { set =>
      val index = new DeleteKeyIndex(set.keyColumns.size)
      val reader = scan.reader(set)
      set.files.foreach { ref =>
        reader.read(ref.file).foreach { keys =>
          index.add(ref.scope, keys, ref.sequenceNumber)
          rowsRead += 1
        }
      }
      EqualityDeleteMatch(scan.keyColumns(set), scan.scope.child, scan.sequence.child, index)
    }
    val deleted = matches.reduce[org.apache.spark.sql.catalyst.expressions.Expression](Or(_, _))
    (Project(scan.columns, Filter(Not(deleted), scan.relation)), rowsRead)
  }
}
