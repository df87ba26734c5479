package eqdelete.sink

import org.apache.spark.sql.{DataFrame, SparkSession}

/**
 * How many tasks the sink's own stages take: sized to the batch, not `spark.sql.shuffle.partitions`
 * (200 by default). A batch of 10^4 changes ran a dozen stages of 200 tasks, each task ~5 ms of
 * scheduling on 2 cores with nothing to do, ~10 s in all; and wrote a data file per task.
 */
object BatchTasks {
  /** Rows one task takes: a batch of up to this many changes is one task. */
  val RowsPerTask = 1000000L

  /** The tasks `changes` are read in (its plan's partitions, no job run), at most the shuffle partitions. */
  def of(changes: DataFrame): Int =
    math.max(1, math.min(changes.rdd.getNumPartitions, shufflePartitions(changes.sparkSession)))

  /** Tasks for `rows` rows, `RowsPerTask` each, at least one and at most the shuffle partitions. */
  def forRows(rows: Long, session: SparkSession): Int =
    math.max(1L, math.min(shufflePartitions(session).toLong, (rows + RowsPerTask - 1) / RowsPerTask)).toInt

  private def shufflePartitions(session: SparkSession): Int = session.conf.get("spark.sql.shuffle.partitions", "200").toInt
}
