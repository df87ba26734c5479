package eqdelete.cost

import org.apache.spark.sql.eqdelete.compat.EqDeleteConf
import org.apache.spark.sql.internal.SQLConf

/**
 * Everything the cost model reads besides the delete plan: the session's spark.eqdelete.*
 * settings and two facts of the running application, so the model is a pure function.
 *
 * @param strategy          the spark.eqdelete.strategy value: auto, filter, join or native
 * @param broadcastMaxBytes -1: never force a broadcast
 * @param parallelism       Spark's default parallelism (sizes the delete-reading tasks)
 */
final case class CostSettings(
    strategy: String,
    minDataRows: Long,
    filterMaxDeleteRows: Long,
    broadcastMaxBytes: Long,
    maxHeapFraction: Double,
    filterForce: Boolean,
    driverHeapBytes: Long,
    parallelism: Int)

object CostSettings {
  def from(conf: SQLConf, driverHeapBytes: Long, parallelism: Int): CostSettings = CostSettings(
    strategy = EqDeleteConf.strategy(conf),
    minDataRows = EqDeleteConf.autoMinDataRows(conf),
    filterMaxDeleteRows = EqDeleteConf.autoFilterMaxDeleteRows(conf),
    broadcastMaxBytes = EqDeleteConf.joinBroadcastMaxBytes(conf),
    maxHeapFraction = EqDeleteConf.filterMaxHeapFraction(conf),
    filterForce = EqDeleteConf.filterForce(conf),
    driverHeapBytes = driverHeapBytes,
    parallelism = parallelism)
}
