package eqdelete.cost

import org.apache.spark.sql.eqdelete.compat.EqDeleteConf
import org.apache.spark.sql.internal.SQLConf

/**
 * Everything the cost model reads besides the scan's deletes: the session's spark.eqdelete.*
 * settings and two facts of the running application, so the model is a pure function.
 *
 * @param strategy          the spark.eqdelete.strategy setting: auto, or one strategy
 * @param broadcastMaxBytes -1: never force a broadcast
 * @param parallelism       Spark's default parallelism (sizes the delete-reading tasks)
 * @param rowsStayInReadTask the query calls input_file_name() or input_file_block_*(), whose
 *                           value exists only in the task that read the row: no shuffled join
 */
final case class CostSettings(
    strategy: StrategySetting,
    minDataRows: Long,
    filterMaxDeleteRows: Long,
    broadcastMaxBytes: Long,
    maxHeapFraction: Double,
    filterForce: Boolean,
    driverHeapBytes: Long,
    parallelism: Int,
    rowsStayInReadTask: Boolean = false)

object CostSettings {
  def from(conf: SQLConf, driverHeapBytes: Long, parallelism: Int, rowsStayInReadTask: Boolean = false): CostSettings = CostSettings(
    strategy = StrategySetting.of(conf),
    minDataRows = EqDeleteConf.autoMinDataRows(conf),
    filterMaxDeleteRows = EqDeleteConf.autoFilterMaxDeleteRows(conf),
    broadcastMaxBytes = EqDeleteConf.joinBroadcastMaxBytes(conf),
    maxHeapFraction = EqDeleteConf.filterMaxHeapFraction(conf),
    filterForce = EqDeleteConf.filterForce(conf),
    driverHeapBytes = driverHeapBytes,
    parallelism = parallelism,
    rowsStayInReadTask = rowsStayInReadTask)
}
