package org.apache.spark.sql.eqdelete.compat

import org.apache.spark.sql.{DataFrame, Dataset, SparkSession}
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan

/** Spark 3.5: `Dataset.ofRows` of the session itself. */
object SparkShim {
  /** A DataFrame over a logical plan eqdelete built. */
  def dataFrame(session: SparkSession, plan: LogicalPlan): DataFrame = Dataset.ofRows(session, plan)
}
