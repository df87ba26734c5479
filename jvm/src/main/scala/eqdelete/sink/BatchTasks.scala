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

  /** Tasks for `rows` rows, `RowsPerTask` each, at least one and at most the shuffle partitions. */
  def forRows(rows: Long, session: SparkSession): Int =
    math.max(1L, math.min(shufflePartitions(session).toLong, (rows + RowsPerTask - 1) / RowsPerTask)).toInt

  private def shufflePartitions(session: SparkSession): Int = session.conf.get("spark.sql.shuffle.partitions", "200").toInt

  private val CachedPartitioning = "spark.sql.optimizer.canChangeCachedPlanOutputPartitioning"

  /**
   * `frame` cached with its shuffles' partitions coalesced to their data, as an uncached query's
   * are: Spark 4 caches a plan with adaptive execution's coalescing off unless this flag is on
   * when the plan is cached (read then, so set only for that call; a flag of the optimizer alone).
   * Spark 3.5 keeps every partition either way, which `forRows` then coalesces.
   */
  def cachedAsShuffled(frame: DataFrame): DataFrame = CachingLock.synchronized {
    // Under one lock: two applies on one session would otherwise restore each other's setting.
    val conf = frame.sparkSession.conf
    val before = conf.getAll.get(CachedPartitioning) // set explicitly, not its default
    conf.set(CachedPartitioning, "true")
    try frame.cache() finally before.fold(conf.unset(CachedPartitioning))(conf.set(CachedPartitioning, _))
  }

  private object CachingLock
}
