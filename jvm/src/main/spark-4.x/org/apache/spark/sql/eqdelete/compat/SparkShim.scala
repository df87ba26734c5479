package org.apache.spark.sql.eqdelete.compat

import org.apache.spark.rdd.RDD
import org.apache.spark.sql.{DataFrame, SparkSession}
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.Attribute
import org.apache.spark.sql.catalyst.plans.logical.{LogicalPlan, Statistics}
import org.apache.spark.sql.catalyst.plans.physical.Partitioning
import org.apache.spark.sql.classic.{SparkSession => ClassicSession}
import org.apache.spark.sql.execution.LogicalRDD

/** Spark 4.x: `LogicalRDD` takes the classic session (the one every rule gets) and a stream. */
object SparkShim {
  def logicalRDD(output: Seq[Attribute], rdd: RDD[InternalRow], partitioning: Partitioning, session: SparkSession,
      stats: Statistics): LogicalPlan =
    LogicalRDD(output, rdd, partitioning, Nil, isStreaming = false, stream = None)(
      session.asInstanceOf[ClassicSession], Some(stats), None)

  /** A DataFrame over a logical plan eqdelete built. */
  def dataFrame(session: SparkSession, plan: LogicalPlan): DataFrame =
    org.apache.spark.sql.classic.Dataset.ofRows(session.asInstanceOf[ClassicSession], plan)
}
