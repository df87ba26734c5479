package org.apache.spark.sql.eqdelete.compat

import org.apache.spark.sql.{DataFrame, SparkSession}
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.classic.{SparkSession => ClassicSession}

/** Spark 4.x: `Dataset.ofRows` of the classic session (the one every rule gets). */
object SparkShim {
  /** A DataFrame over a logical plan eqdelete built. */
  def dataFrame(session: SparkSession, plan: LogicalPlan): DataFrame =
    org.apache.spark.sql.classic.Dataset.ofRows(session.asInstanceOf[ClassicSession], plan)
}
