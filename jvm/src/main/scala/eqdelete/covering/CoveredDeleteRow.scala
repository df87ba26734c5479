package eqdelete.covering

import eqdelete.cost.IndexedSet
import eqdelete.explain.CoveredRows
import eqdelete.deleteindex.DeleteKeyIndex
import eqdelete.deleteindex.build.{BroadcastHandle, BuildDeleteKeyIndex, DeleteKeyIndexSource}

import org.apache.iceberg.Schema
import org.apache.iceberg.io.FileIO
import org.apache.spark.TaskContext
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Expression, NonSQLExpression, ScalarSubquery}
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenFallback
import org.apache.spark.sql.types.{BooleanType, DataType}

/**
 * True when a delete row of a multi-column set is covered by a single-column set's index
 * (`cost.Covering`): the index deletes the row's `key` at its `sequence` number or a newer one,
 * in its `scope` or globally. Used by the join to drop such rows from a shuffled delete side;
 * counts what it drops in `counter` under `part`. Delete sides are small next to the data, so
 * it is interpreted.
 *
 * `index` is a scalar subquery over the single-column set's [[BuildDeleteKeyIndex]].
 */
case class CoveredDeleteRow(key: Expression, scope: Expression, sequence: Expression, index: Expression,
    counter: CoveredRows, part: Int)
  extends Expression with NonSQLExpression with CodegenFallback {

  override def children: Seq[Expression] = Seq(key, scope, sequence, index)
  override def dataType: DataType = BooleanType
  override def nullable: Boolean = false
  override def prettyName: String = "eqdelete_covered"
  override def toString: String =
    s"$prettyName($key; index $index${counter.rows.map(n => s"; $n covered").getOrElse("")})"

  @transient private lazy val coverer: DeleteKeyIndex = BroadcastHandle.read(index.eval(null).asInstanceOf[Array[Byte]]).value
  @transient private var partition = -1

  override def eval(input: InternalRow): Any = {
    if (partition < 0) {
      // Once per task: so a partition with nothing covered still reports its zero.
      partition = Option(TaskContext.get()).map(_.partitionId()).getOrElse(0)
      counter.add((CoveredRows.key(part, partition), 0L))
    }
    val covered = coverer.covers(scope.eval(input).asInstanceOf[Long], Array(key.eval(input)),
      sequence.eval(input).asInstanceOf[Long])
    if (covered) counter.add((CoveredRows.key(part, partition), 1L))
    covered
  }

  override protected def withNewChildrenInternal(newChildren: IndexedSeq[Expression]): CoveredDeleteRow =
    copy(key = newChildren(0), scope = newChildren(1), sequence = newChildren(2), index = newChildren(3))
}

object CoveredDeleteRow {
  /** The check of a delete row's `key` against the index of `by` (a covering single-column set), built as the filter builds it. */
  def against(by: IndexedSet, io: FileIO, readSchema: Schema, key: Expression, scope: Expression, sequence: Expression,
      counter: CoveredRows, part: Int): CoveredDeleteRow =
    CoveredDeleteRow(key, scope, sequence, ScalarSubquery(BuildDeleteKeyIndex(DeleteKeyIndexSource(by, io, readSchema))), counter, part)
}
