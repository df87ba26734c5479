package org.apache.spark.sql.eqdelete.compat

import org.apache.spark.SparkContext
import org.apache.spark.sql.SparkSession

/** Spark-private calls eqdelete makes outside the config declarations and filter translation. */
object SparkInternals {
  /** Waits until Spark has delivered every pending listener event (query executions included). */
  def waitForListeners(session: SparkSession): Unit = session.sparkContext.listenerBus.waitUntilEmpty()

  /** The running SparkContext, without creating one. */
  def activeContext: Option[SparkContext] = SparkContext.getActive
}
