package eqdelete.filter

import org.apache.spark.TaskContext
import org.apache.spark.rdd.RDD
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Attribute, AttributeSet, BindReferences, Expression, SortOrder}
import org.apache.spark.sql.catalyst.plans.physical.Partitioning
import org.apache.spark.sql.execution.{SparkPlan, UnaryExecNode}
import org.apache.spark.sql.execution.metric.{SQLMetric, SQLMetrics}
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector
import org.apache.spark.sql.types.BooleanType
import org.apache.spark.sql.vectorized.{ColumnVector, ColumnarBatch}

/**
 * Columnar: passes `child`'s batches on with one boolean column more per lookup of `lookups`,
 * `deleted`'s attribute of the same position: whether that lookup's delete rows delete the row.
 * The filter above reads those columns ([[DeletedInBatch]], which counts the rows removed) where
 * it evaluated each [[EqualityDeleteMatch]] row by row; here the keys of a batch are looked up
 * together ([[DeletedRowsOfBatch]]).
 *
 * The lookups are expressions of this node, so Spark runs their index subqueries before it
 * executes the node, as it did for the filter's.
 */
case class LookUpDeletedKeysExec(lookups: Seq[EqualityDeleteMatch], deleted: Seq[Attribute], child: SparkPlan)
  extends UnaryExecNode {
  require(lookups.size == deleted.size)

  override def output: Seq[Attribute] = child.output ++ deleted
  override def producedAttributes: AttributeSet = AttributeSet(deleted)
  override def supportsColumnar: Boolean = true
  override def outputPartitioning: Partitioning = child.outputPartitioning
  override def outputOrdering: Seq[SortOrder] = child.outputOrdering

  override lazy val metrics: Map[String, SQLMetric] = Map(
    "lookupTime" -> SQLMetrics.createNanoTimingMetric(sparkContext, "time looking up delete keys"))

  override def simpleString(maxFields: Int): String =
    s"LookUpDeletedKeys ${lookups.zip(deleted).map { case (l, d) => s"$d = $l" }.mkString("[", ", ", "]")}"

  override protected def doExecute(): RDD[InternalRow] =
    throw new IllegalStateException(s"$nodeName hands out columnar batches only")

  override protected def doExecuteColumnar(): RDD[ColumnarBatch] = {
    val bound = lookups.map(boundToChild)
    val lookupTime = longMetric("lookupTime")
    // A reader's batch may hold more columns than the scan's output (Iceberg's reads columns its
    // deletes need): the new ones go right after the output's, where the consumer looks.
    val width = child.output.size
    child.executeColumnar().mapPartitions { batches =>
      val marks = bound.map(_.forTask())
      val columns = bound.map(_ => new OnHeapColumnVector(4096, BooleanType))
      Option(TaskContext.get()).foreach(_.addTaskCompletionListener[Unit](_ => columns.foreach(_.close())))
      batches.map { batch =>
        val started = System.nanoTime()
        val n = batch.numRows
        val all = new Array[ColumnVector](width + columns.size)
        var c = 0
        while (c < width) { all(c) = batch.column(c); c += 1 }
        marks.zip(columns).foreach { case (mark, column) =>
          column.reset()
          column.reserve(n)
          mark.mark(batch, column)
          all(c) = column
          c += 1
        }
        lookupTime += System.nanoTime() - started
        new ColumnarBatch(all, n)
      }
    }
  }

  private def boundToChild(lookup: EqualityDeleteMatch): BatchDeleteLookup = {
    val input = child.output
    def ordinal(e: Expression): Int = input.indexWhere(_.exprId == e.asInstanceOf[Attribute].exprId)
    val runs = (lookup.scope.references ++ lookup.sequence.references).toSeq
    BatchDeleteLookup(
      lookup.broadcast,
      lookup.keys.map(ordinal).toArray,
      lookup.keys.map(_.dataType).toArray,
      BindReferences.bindReference(lookup.scope, input),
      BindReferences.bindReference(lookup.sequence, input),
      runs.map(ordinal).toArray,
      runs.map(_.dataType).toArray)
  }

  override protected def withNewChildInternal(newChild: SparkPlan): LookUpDeletedKeysExec = copy(child = newChild)
}
