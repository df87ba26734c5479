package eqdelete.join

import org.apache.spark.rdd.RDD
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.analysis.MultiInstanceRelation
import org.apache.spark.sql.catalyst.expressions.{Attribute, UnsafeProjection}
import org.apache.spark.sql.catalyst.plans.logical.{LeafNode, LogicalPlan, Statistics}
import org.apache.spark.sql.catalyst.plans.physical.{Partitioning, UnknownPartitioning}
import org.apache.spark.sql.execution.{LeafExecNode, SparkPlan, SparkStrategy}
import org.apache.spark.sql.execution.metric.SQLMetric

/**
 * The delete rows of one join part, as the join reads them: an RDD read by Spark tasks, with the
 * cost model's size estimate for join selection. Its node in Spark's UI says what it is
 * (`EqualityDeleteRows`, the join strategy's delete side) and what came of it: the delete rows
 * read, and the data rows the join removed with them (`JoinMetrics`).
 */
final case class DeleteRowsRelation(output: Seq[Attribute], rdd: RDD[InternalRow], label: String, statistics: Statistics)(
    val metrics: JoinMetrics) extends LeafNode with MultiInstanceRelation {
  override def newInstance(): LogicalPlan = copy(output = output.map(_.newInstance()))(metrics)
  override def computeStats(): Statistics = statistics
  override protected def otherCopyArgs: Seq[AnyRef] = metrics :: Nil
  override def nodeName: String = "EqualityDeleteRows"
  override def simpleString(maxFields: Int): String = s"$nodeName $label"
}

/** Reads the delete rows, counting them, as unsafe rows (what Spark's operators above expect). */
final case class DeleteRowsExec(output: Seq[Attribute], rdd: RDD[InternalRow], label: String)(val joinMetrics: JoinMetrics)
    extends LeafExecNode {
  override lazy val metrics: Map[String, SQLMetric] = joinMetrics.all
  override protected def otherCopyArgs: Seq[AnyRef] = joinMetrics :: Nil
  override def outputPartitioning: Partitioning = UnknownPartitioning(rdd.getNumPartitions)

  override protected def doExecute(): RDD[InternalRow] = {
    val read = joinMetrics.deleteRows
    val schema = this.schema
    rdd.mapPartitionsWithIndex { (index, rows) =>
      val project = UnsafeProjection.create(schema)
      project.initialize(index)
      rows.map { row =>
        read += 1
        project(row)
      }
    }
  }

  override def nodeName: String = "EqualityDeleteRows"
  override def simpleString(maxFields: Int): String = s"$nodeName $label"
}

/** Plans [[DeleteRowsRelation]]s for execution. */
object PlanDeleteRows extends SparkStrategy {
  override def apply(plan: LogicalPlan): Seq[SparkPlan] = plan match {
    case relation: DeleteRowsRelation => DeleteRowsExec(relation.output, relation.rdd, relation.label)(relation.metrics) :: Nil
    case _ => Nil
  }
}
