package eqdelete.sql

import eqdelete.explain.Introspection

import org.apache.spark.rdd.RDD
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.analysis.MultiInstanceRelation
import org.apache.spark.sql.catalyst.expressions.{Attribute, AttributeReference, UnsafeProjection}
import org.apache.spark.sql.catalyst.plans.logical.{LeafNode, LogicalPlan, Statistics}
import org.apache.spark.sql.execution.{LeafExecNode, SparkPlan, SparkStrategy}

/** The rows of an eqdelete table-valued function, to be computed when the query runs. */
private[eqdelete] final case class InformationRelation(function: InformationFunction, arguments: Seq[String], output: Seq[Attribute])
    extends LeafNode with MultiInstanceRelation with Introspection {
  override def newInstance(): LogicalPlan = copy(output = output.map(_.newInstance()))
  // A few rows: small enough to broadcast when joined.
  override def computeStats(): Statistics = Statistics(sizeInBytes = BigInt(1) << 16)
  override def simpleString(maxFields: Int): String = s"${function.name}(${arguments.map(a => s"'$a'").mkString(", ")})"
}

private[eqdelete] object InformationRelation {
  def apply(function: InformationFunction, arguments: Seq[String]): InformationRelation =
    InformationRelation(function, arguments, function.output.fields.toSeq.map(f => AttributeReference(f.name, f.dataType, f.nullable)()))
}

/** Computes a table-valued function's rows once, on the driver, when the query runs. */
private[eqdelete] final case class InformationExec(function: InformationFunction, arguments: Seq[String], output: Seq[Attribute])
    extends LeafExecNode {
  @transient private lazy val rows: Array[InternalRow] = {
    val project = UnsafeProjection.create(output, output)
    function.rows(SparkSession.active, arguments).map(row => project(row).copy()).toArray
  }

  override protected def doExecute(): RDD[InternalRow] = sparkContext.parallelize(rows.toSeq, 1)
  override def executeCollect(): Array[InternalRow] = rows
  override def executeTake(limit: Int): Array[InternalRow] = rows.take(limit)
  override def simpleString(maxFields: Int): String = s"${function.name}(${arguments.map(a => s"'$a'").mkString(", ")})"
}

private[eqdelete] object PlanInformationFunctions extends SparkStrategy {
  override def apply(plan: LogicalPlan): Seq[SparkPlan] = plan match {
    case InformationRelation(function, arguments, output) => InformationExec(function, arguments, output) :: Nil
    case _ => Nil
  }
}
