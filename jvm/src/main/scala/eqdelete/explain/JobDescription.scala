package eqdelete.explain

import org.apache.spark.SparkContext

/** The description Spark's UI shows for the jobs eqdelete starts, set for a block and restored after. */
object JobDescription {
  private val Key = "spark.job.description"

  def during[T](context: SparkContext, description: String)(body: => T): T = {
    val before = context.getLocalProperty(Key)
    context.setLocalProperty(Key, description)
    try body finally context.setLocalProperty(Key, before)
  }
}
