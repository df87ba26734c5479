package eqdelete.cost

import org.apache.spark.sql.eqdelete.compat.EqDeleteConf

/**
 * The share of the driver's heap eqdelete's driver-side structures may take
 * (spark.eqdelete.filter.maxHeapFraction), checked from metadata before anything is read: the
 * filter's delete indexes, counted twice (each index and its serialized broadcast copy), and
 * the join's broadcast sides, counted three times (the rows collected, Spark's hash relation of
 * them and its serialized copy are on the driver at once while it builds). Past it, a filter becomes a join and a broadcast a shuffle, so a
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

  /** Whether the join broadcasts a delete side estimated at `bytes`; never when the setting is -1 (Spark decides). */
  def broadcasts(bytes: BigInt, settings: CostSettings): Boolean =
    settings.broadcastMaxBytes >= 0 && bytes <= settings.broadcastMaxBytes && 3 * bytes <= budget(settings)
}
