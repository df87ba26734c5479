package eqdelete.explain

import org.apache.spark.util.AccumulatorV2

/**
 * How many delete rows of one equality set were dropped because a single-column delete covers
 * them (`cost.Covering`), for the decision records and EXPLAIN. Counted per (delete part, read
 * partition) and merged by replacing, not adding, so a retried task or a plan run again counts
 * its rows once; `rows` is None until some of the set's rows were read.
 */
final class CoveredRows extends AccumulatorV2[(Long, Long), java.lang.Long] {
  private val counts = new java.util.HashMap[java.lang.Long, java.lang.Long]()

  override def isZero: Boolean = synchronized(counts.isEmpty)
  override def copy(): CoveredRows = synchronized {
    val copied = new CoveredRows
    copied.counts.putAll(counts)
    copied
  }
  override def reset(): Unit = synchronized(counts.clear())
  /** `(CoveredRows.key(part, partition), rows)`: adds within a task. */
  override def add(v: (Long, Long)): Unit = synchronized {
    counts.merge(v._1, v._2, (a: java.lang.Long, b: java.lang.Long) => java.lang.Long.valueOf(a + b))
  }
  override def merge(other: AccumulatorV2[(Long, Long), java.lang.Long]): Unit = other match {
    case that: CoveredRows =>
      val theirs = that.copy().counts
      synchronized(counts.putAll(theirs))
    case _ => throw new UnsupportedOperationException(s"cannot merge ${other.getClass.getName} into CoveredRows")
  }
  override def value: java.lang.Long = synchronized {
    var sum = 0L
    counts.values().forEach(v => sum += v)
    sum
  }

  /** Records `rows` for one part as a whole, on the driver (the filter's index build). */
  def record(part: Int, rows: Long): Unit = synchronized(counts.put(CoveredRows.key(part, 0), rows))

  def rows: Option[Long] = if (isZero) None else Some(value.longValue())
}

object CoveredRows {
  def key(part: Int, partition: Int): Long = (part.toLong << 32) | (partition & 0xFFFFFFFFL)

  /** A counter registered with Spark, so executors' counts reach the driver. */
  def registered(context: org.apache.spark.SparkContext, keys: String): CoveredRows = {
    val counter = new CoveredRows
    context.register(counter, s"eqdelete delete rows of $keys covered by single-column deletes")
    counter
  }
}
