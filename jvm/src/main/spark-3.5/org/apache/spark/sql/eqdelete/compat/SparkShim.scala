package org.apache.spark.sql.eqdelete.compat

import org.apache.spark.sql.{DataFrame, Dataset, SparkSession}
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan

/** Spark 3.5: `Dataset.ofRows` of the session itself. */
object SparkShim {
  /** A DataFrame over a logical plan eqdelete built. */
  def dataFrame(session: SparkSession, plan: LogicalPlan): DataFrame = Dataset.ofRows(session, plan)

  /**
   * A streaming DataFrame of `schema` whose rows are those of the DataFrame `rows` makes, made
   * and planned only when a job reads them (DeferredQueryRDD), as its own query in Spark's UI:
   * what a micro-batch source's `getBatch` returns.
   */
  def deferredStreamingDataFrame(session: SparkSession, schema: org.apache.spark.sql.types.StructType,
      rows: () => DataFrame): DataFrame = {
    val deferred = new DeferredQueryRDD(session.sparkContext, () => {
      val df = rows()
      val execution = df.queryExecution
      org.apache.spark.sql.execution.SQLExecution.withNewExecutionId(execution, Some("eqdelete-changes batch"))(execution.toRdd)
    })
    session.internalCreateDataFrame(deferred, schema, isStreaming = true)
  }
}
