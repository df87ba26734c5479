package eqdelete.cost

import org.apache.spark.sql.eqdelete.compat.EqDeleteConf

/**
 * The share of the driver's heap eqdelete's driver-side structures may take
 * (spark.eqdelete.filter.maxHeapFraction), checked from metadata before anything is read: the
 * filter's delete indexes, counted twice (each index and its serialized broadcast copy), and
 * the join's broadcast sides. Past it, a filter becomes a join and a broadcast a shuffle, so a
 * large delete set never takes the driver, or in local mode the whole application, down.
 */
object DriverMemory {

  def heapBytes: Long = Runtime.getRuntime.maxMemory()

  def budget(settings: CostSettings): Long = (settings.driverHeapBytes * settings.maxHeapFraction).toLong

  /** The filter's indexes, with their broadcast copies. */
  def filterBytes(indexes: Seq[IndexedSet]): Long = 2 * indexes.map(_.estimatedBytes).sum

  /** Why the filter's indexes do not fit the budget, or None when they do. */
  def filterOverBudget(indexes: Seq[IndexedSet], settings: CostSettings): Option[String] = {
    val needed = filterBytes(indexes)
    val allowed = budget(settings)
    if (needed <= allowed) None
    else Some(s"the filter's index of ${indexes.map(_.read.records).sum} delete rows needs ~${needed >> 20} MB with " +
      s"its broadcast copy, over ${EqDeleteConf.FILTER_MAX_HEAP_FRACTION.key}=${settings.maxHeapFraction} " +
      s"of the ${settings.driverHeapBytes >> 20} MB driver heap (${allowed >> 20} MB)")
  }

  /** The join broadcasts delete sides up to this many bytes; -1: never forced, Spark decides. */
  def broadcastLimit(settings: CostSettings): Long =
    if (settings.broadcastMaxBytes < 0) -1L else math.min(settings.broadcastMaxBytes, budget(settings))
}
