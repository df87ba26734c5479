package eqdelete.planning

import scala.util.Try

import org.apache.iceberg.{FileScanTask, Schema}
import org.apache.iceberg.expressions.{And, Binder, Expression}
import org.apache.iceberg.expressions.Expression.Operation
import org.apache.iceberg.metrics.MetricsReport

/**
 * The tasks Iceberg planned for a scan (snapshot, row filter, case sensitivity), kept so the
 * rewritten scans of the same read use them rather than plan the same files again, and the
 * metrics report Iceberg's planning made of them (its scan report: planning time, manifests,
 * data and delete files and their sizes), which a scan served these tasks reports as its own.
 * `onlyFiles`: the tasks are those of these data files only, a read's `_file` restriction
 * (ScanFilters.fileRestriction), which its filter above the scan also applies.
 */
final case class PlannedTasks(
    snapshotId: Long,
    readSchema: Schema,
    filter: Expression,
    caseSensitive: Boolean,
    tasks: IndexedSeq[FileScanTask],
    reports: Seq[MetricsReport] = Nil,
    onlyFiles: Option[Set[String]] = None) {

  /**
   * Whether a scan of `snapshot` with `rowFilter` plans exactly these tasks: the same snapshot,
   * case sensitivity, and filter conjuncts (compared bound to the schema read, in any order and
   * nesting). Anything else plans again, which is slower but never wrong.
   */
  def serves(snapshot: Long, rowFilter: Expression, isCaseSensitive: Boolean): Boolean =
    snapshot == snapshotId && isCaseSensitive == caseSensitive &&
      Try(PlannedTasks.sameConjuncts(filter, rowFilter, readSchema, caseSensitive)).getOrElse(false)
}

object PlannedTasks {
  private def conjuncts(e: Expression): Seq[Expression] = e match {
    case and: And => conjuncts(and.left()) ++ conjuncts(and.right())
    case other if other.op() == Operation.TRUE => Nil
    case other => Seq(other)
  }

  private[planning] def sameConjuncts(a: Expression, b: Expression, schema: Schema, caseSensitive: Boolean): Boolean = {
    def bound(e: Expression) = conjuncts(e).map(c => Binder.bind(schema.asStruct(), c, caseSensitive))
    val (left, right) = (bound(a), bound(b))
    left.forall(l => right.exists(_.isEquivalentTo(l))) && right.forall(r => left.exists(_.isEquivalentTo(r)))
  }
}
