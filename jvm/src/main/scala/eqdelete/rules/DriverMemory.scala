package eqdelete.rules

import eqdelete.planning.{DeleteKeyIndex, DeletePlan, EqualityDeleteSet}

import org.apache.iceberg.Schema
import org.apache.iceberg.spark.SparkSchemaUtil
import org.apache.spark.sql.eqdelete.compat.EqDeleteConf
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.types.DataType

/**
 * The share of the driver's heap eqdelete's driver-side structures may take
 * (spark.eqdelete.filter.maxHeapFraction), checked from metadata before anything is read: the
 * filter's delete indexes, counted twice (each index and its serialized broadcast copy), and
 * the join's broadcast side. Past it, a filter becomes a join and a broadcast a shuffle, so a
 * large delete set never takes the driver, or in local mode the whole application, down.
 */
object DriverMemory {

  def heapBytes: Long = Runtime.getRuntime.maxMemory()

  def budget(conf: SQLConf, heap: Long): Long = (heap * EqDeleteConf.filterMaxHeapFraction(conf)).toLong

  def keyTypes(set: EqualityDeleteSet, readSchema: Schema): Seq[DataType] =
    set.equalityIds.map(id => SparkSchemaUtil.convert(readSchema.findType(id)))

  /** The filter's indexes of every equality set of `plan`, with their broadcast copies. */
  def filterBytes(plan: DeletePlan, readSchema: Schema): Long =
    2 * plan.deleteSets.map(set => DeleteKeyIndex.estimatedBytes(keyTypes(set, readSchema), set.records)).sum

  /** Why the filter's indexes do not fit the budget, or None when they do. */
  def filterOverBudget(plan: DeletePlan, readSchema: Schema, conf: SQLConf, heap: Long): Option[String] = {
    val needed = filterBytes(plan, readSchema)
    val allowed = budget(conf, heap)
    if (needed <= allowed) None
    else Some(s"the filter's index of ${plan.deleteRecords} delete rows needs ~${needed >> 20} MB with its broadcast " +
      s"copy, over ${EqDeleteConf.FILTER_MAX_HEAP_FRACTION.key}=${EqDeleteConf.filterMaxHeapFraction(conf)} " +
      s"of the ${heap >> 20} MB driver heap (${allowed >> 20} MB)")
  }

  /** The join broadcasts delete sides up to this many bytes; -1: never forced, Spark decides. */
  def broadcastLimit(conf: SQLConf, heap: Long): Long = {
    val limit = EqDeleteConf.joinBroadcastMaxBytes(conf)
    if (limit < 0) -1L else math.min(limit, budget(conf, heap))
  }
}
