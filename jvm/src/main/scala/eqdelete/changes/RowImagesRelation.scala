package eqdelete.changes

import org.apache.spark.rdd.RDD
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.analysis.MultiInstanceRelation
import org.apache.spark.sql.catalyst.expressions.{Attribute, UnsafeProjection}
import org.apache.spark.sql.catalyst.plans.logical.{LeafNode, LogicalPlan, Statistics}
import org.apache.spark.sql.catalyst.plans.physical.{Partitioning, UnknownPartitioning}
import org.apache.spark.sql.execution.{LeafExecNode, SparkPlan, SparkStrategy}
import org.apache.spark.sql.execution.metric.{SQLMetric, SQLMetrics}

/**
 * Rows kept row images give when the plan runs, looked up at the stores by key: snapshots' deleted
 * rows by their delete keys ([[KeptRowImages]]), or a copy's rows by the keys a batch removes
 * (`sink.KeptCopyRows`). Its node in EXPLAIN and Spark's UI says which, and counts the rows found.
 */
final case class RowImagesRelation(output: Seq[Attribute], rdd: RDD[InternalRow], label: String, statistics: Statistics)
    extends LeafNode with MultiInstanceRelation {
  override def newInstance(): LogicalPlan = copy(output = output.map(_.newInstance()))
  override def computeStats(): Statistics = statistics
  override def nodeName: String = "RowImages"
  override def simpleString(maxFields: Int): String = s"$nodeName $label"
}

final case class RowImagesExec(output: Seq[Attribute], rdd: RDD[InternalRow], label: String) extends LeafExecNode {
  override lazy val metrics: Map[String, SQLMetric] =
    Map("numOutputRows" -> SQLMetrics.createMetric(sparkContext, "rows found in the row images"))
  override def outputPartitioning: Partitioning = UnknownPartitioning(rdd.getNumPartitions)

  override protected def doExecute(): RDD[InternalRow] = {
    val found = metrics("numOutputRows")
    val schema = this.schema
    rdd.mapPartitionsWithIndex { (index, rows) =>
      val project = UnsafeProjection.create(schema)
      project.initialize(index)
      rows.map { row => found += 1; project(row) }
    }
  }

  override def nodeName: String = "RowImages"
  override def simpleString(maxFields: Int): String = s"$nodeName $label"
}

/** Plans [[RowImagesRelation]]s for execution. */
object PlanRowImages extends SparkStrategy {
  override def apply(plan: LogicalPlan): Seq[SparkPlan] = plan match {
    case r: RowImagesRelation => RowImagesExec(r.output, r.rdd, r.label) :: Nil
    case _ => Nil
  }
}
