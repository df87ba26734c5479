package org.apache.spark.sql.eqdelete.compat

import org.apache.spark.sql.{DataFrame, SparkSession}
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.classic.{SparkSession => ClassicSession}

/** Spark 4.x: `Dataset.ofRows` of the classic session (the one every rule gets). */
object SparkShim {
  /** A DataFrame over a logical plan eqdelete built. */
  def dataFrame(session: SparkSession, plan: LogicalPlan): DataFrame =
    org.apache.spark.sql.classic.Dataset.ofRows(session.asInstanceOf[ClassicSession], plan)

  /**
   * A DataFrame of rows made on the executors already in Spark's internal form: no encoder turns
   * them into it, so a new executor JVM's first task does not pay for Spark's Scala reflection
   * (which a `Row` encoder's serializer starts, a second or two on a cold JVM).
   */
  def internalDataFrame(session: SparkSession, rows: org.apache.spark.rdd.RDD[org.apache.spark.sql.catalyst.InternalRow],
      schema: org.apache.spark.sql.types.StructType): DataFrame =
    session.asInstanceOf[ClassicSession].internalCreateDataFrame(rows, schema)

  /**
   * A streaming DataFrame of `schema` whose rows are those of the DataFrame `rows` makes, made
   * and planned only when a job reads them (DeferredQueryRDD), as its own query in Spark's UI:
   * what a micro-batch source's `getBatch` returns.
   */
  def deferredStreamingDataFrame(session: SparkSession, schema: org.apache.spark.sql.types.StructType,
      rows: () => DataFrame): DataFrame = {
    val deferred = new DeferredQueryRDD(session.sparkContext, () => {
      val df = rows()
      val execution = df.asInstanceOf[org.apache.spark.sql.classic.Dataset[_]].queryExecution
      org.apache.spark.sql.execution.SQLExecution.withNewExecutionId(execution, Some("eqdelete-changes batch"))(execution.toRdd)
    })
    session.asInstanceOf[ClassicSession].internalCreateDataFrame(deferred, schema, isStreaming = true)
  }
}
