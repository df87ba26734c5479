package eqdelete.join

import org.apache.spark.SparkContext
import org.apache.spark.sql.execution.metric.{SQLMetric, SQLMetrics}

/**
 * What one join part did, on its delete side's node in Spark's UI: the delete rows it read, and
 * the data rows it removed (counted where the join's condition first holds for a row,
 * `CountingCondition`; under resolve's semi join, the rows it found deleted).
 */
final class JoinMetrics(val deleteRows: SQLMetric, val rowsRemoved: SQLMetric) extends Serializable {
  def all: Map[String, SQLMetric] = Map("deleteRows" -> deleteRows, "rowsRemoved" -> rowsRemoved)
}

object JoinMetrics {
  def apply(context: SparkContext): JoinMetrics = new JoinMetrics(
    SQLMetrics.createMetric(context, "delete rows read"),
    SQLMetrics.createMetric(context, "data rows removed by the join"))
}
