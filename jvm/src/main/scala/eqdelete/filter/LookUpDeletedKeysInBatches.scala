package eqdelete.filter

import eqdelete.deleteindex.KeyBytes

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.expressions.{Attribute, AttributeReference, AttributeSet, Expression, IsNotNull, PredicateHelper}
import org.apache.spark.sql.catalyst.rules.Rule
import org.apache.spark.sql.eqdelete.compat.EqDeleteConf
import org.apache.spark.sql.execution.{ColumnarToRowExec, FilterExec, ProjectExec, SparkPlan}
import org.apache.spark.sql.types.BooleanType

/**
 * Physical, after Spark has put its columnar transitions in: where the filter strategy's
 * predicate sits on rows converted from a columnar scan, each [[EqualityDeleteMatch]] with a
 * hashed index moves below the conversion, into [[LookUpDeletedKeysExec]], and the filter reads
 * the column that adds:
 * {{{
 *   Filter(NOT eqdelete_deleted(keys; index) AND ...)        Project(the filter's columns)
 *     ColumnarToRow                                   =>       Filter(NOT deleted AND ...)
 *       scan                                                     ColumnarToRow
 *                                                                  LookUpDeletedKeys(deleted = eqdelete_deleted(...))
 *                                                                    scan
 * }}}
 * Only lookups it can bind: top-level keys of packable types, scope and sequence number from
 * columns of the scan that mark runs of rows (`_file`); and only filters that hold nothing else
 * (see `onlyDeletes`). Everything else keeps the row-at-a-time predicate, which gives the same
 * rows. Off with spark.eqdelete.filter.batchedLookup=false.
 */
case class LookUpDeletedKeysInBatches(session: SparkSession) extends Rule[SparkPlan] with PredicateHelper {

  override def apply(plan: SparkPlan): SparkPlan =
    if (!EqDeleteConf.filterBatchedLookup(session.sessionState.conf)) plan
    else plan.transformUp {
      case filter @ FilterExec(condition, ColumnarToRowExec(scan)) if onlyDeletes(condition) =>
        val lookups = condition.collect { case m: EqualityDeleteMatch if bindable(m, scan.outputSet) => m }.distinct
        if (lookups.isEmpty) filter
        else {
          val deleted = lookups.map(_ => AttributeReference("eqdelete_deleted", BooleanType, nullable = false)())
          val column = lookups.zip(deleted).toMap
          val reading = condition.transform { case m: EqualityDeleteMatch if column.contains(m) => DeletedInBatch(column(m), m.removed) }
          ProjectExec(filter.output, FilterExec(reading, ColumnarToRowExec(LookUpDeletedKeysExec(lookups, deleted, scan))))
        }
    }

  /**
   * Whether the filter holds nothing but the deletes (and Spark's null checks). A query's own
   * row filter is evaluated first in the same predicate, and a row it drops is never looked up;
   * the batch would look up every row, so a selective query keeps the row-at-a-time lookup.
   */
  private def onlyDeletes(condition: Expression): Boolean =
    splitConjunctivePredicates(condition).forall(c => c.isInstanceOf[IsNotNull] || c.exists(_.isInstanceOf[EqualityDeleteMatch]))

  private def bindable(m: EqualityDeleteMatch, columns: AttributeSet): Boolean = {
    val runs = m.scope.references ++ m.sequence.references
    m.lookUpInBatches &&
      m.keys.forall(k => k.isInstanceOf[Attribute] && columns.contains(k.asInstanceOf[Attribute]) && KeyBytes.supports(k.dataType)) &&
      runs.subsetOf(columns) && runs.forall(a => BatchDeleteLookup.runTypeSupported(a.dataType))
  }
}
