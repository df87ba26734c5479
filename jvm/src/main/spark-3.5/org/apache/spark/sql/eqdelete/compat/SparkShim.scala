package org.apache.spark.sql.eqdelete.compat

import org.apache.spark.rdd.RDD
import org.apache.spark.sql.{DataFrame, Dataset, SparkSession}
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.Attribute
import org.apache.spark.sql.catalyst.plans.logical.{LogicalPlan, Statistics}
import org.apache.spark.sql.catalyst.plans.physical.Partitioning
import org.apache.spark.sql.execution.LogicalRDD

/** Spark 3.5: `LogicalRDD` takes the session itself and no stream. */
object SparkShim {
  def logicalRDD(output: Seq[Attribute], rdd: RDD[InternalRow], partitioning: Partitioning, session: SparkSession,
      stats: Statistics): LogicalPlan =
    LogicalRDD(output, rdd, partitioning, Nil, isStreaming = false)(session, Some(stats), None)

  /** A DataFrame over a logical plan eqdelete built. */
  def dataFrame(session: SparkSession, plan: LogicalPlan): DataFrame = Dataset.ofRows(session, plan)
}
