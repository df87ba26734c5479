package eqdelete.rules

import eqdelete.planning.{DeleteKeyIndex, DeletePlan, EqualityDeleteSet}

import org.apache.iceberg.Schema
import org.apache.iceberg.spark.SparkSchemaUtil
import org.apache.spark.sql.eqdelete.EqDeleteConf
import org.apache.spark.sql.eqdelete.EqDeleteConf.Strategy
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.types.DataType

/**
 * The cost model of `auto`, from Iceberg metadata and Spark settings only (no data is read):
 *
 *  1. Fewer than `auto.minDataRows` rows in data files with equality deletes: native. A rewrite
 *     adds a planning pass and a job reading the delete files, which small scans do not repay.
 *  2. Up to `auto.filterMaxDeleteRows` delete rows, and an index of them that fits a quarter of
 *     the driver's heap: filter. The sweeps (PERFORMANCE.md) show it fastest there: it reads
 *     the delete files once (and keeps the index across queries), ships it once per executor,
 *     and costs each row one cache-resident lookup.
 *  3. Otherwise: join. Broadcast while the delete side's estimate is under
 *     `join.broadcastMaxBytes`, shuffled above it, which scales to delete sets of any size.
 */
object AutoStrategy {

  private def keyTypes(set: EqualityDeleteSet, readSchema: Schema): Seq[DataType] =
    set.equalityIds.map(id => SparkSchemaUtil.convert(readSchema.findType(id)))

  def choose(plan: DeletePlan, readSchema: Schema, conf: SQLConf, driverHeapBytes: Long): (String, String) = {
    val minRows = EqDeleteConf.autoMinDataRows(conf)
    val maxFilterRows = EqDeleteConf.autoFilterMaxDeleteRows(conf)
    val rows = plan.deleteRecords
    lazy val indexBytes = plan.deleteSets.map { set =>
      set.records * DeleteKeyIndex.estimatedBytesPerKey(keyTypes(set, readSchema))
    }.sum
    val heapShare = driverHeapBytes / 4

    if (plan.rowsWithDeletes < minRows) {
      (Strategy.Native, s"auto: ${plan.rowsWithDeletes} rows in files with deletes < " +
        s"${EqDeleteConf.AUTO_MIN_DATA_ROWS.key}=$minRows; a rewrite costs more than it saves")
    } else if (rows <= maxFilterRows && indexBytes <= heapShare) {
      (Strategy.Filter, s"auto: $rows delete rows <= ${EqDeleteConf.AUTO_FILTER_MAX_DELETE_ROWS.key}=$maxFilterRows " +
        s"and their index (~${indexBytes >> 20} MB) fits a quarter of the driver heap")
    } else {
      val why = if (rows > maxFilterRows) {
        s"$rows delete rows > ${EqDeleteConf.AUTO_FILTER_MAX_DELETE_ROWS.key}=$maxFilterRows"
      } else {
        s"their index (~${indexBytes >> 20} MB) exceeds a quarter of the driver heap"
      }
      val limit = EqDeleteConf.joinBroadcastMaxBytes(conf)
      val kind = if (plan.deleteSets.forall(set => JoinPlanBuilder.broadcasts(set.files, keyTypes(set, readSchema), limit))) {
        s"broadcast (delete side <= ${EqDeleteConf.JOIN_BROADCAST_MAX_BYTES.key})"
      } else {
        s"shuffled (delete side > ${EqDeleteConf.JOIN_BROADCAST_MAX_BYTES.key})"
      }
      (Strategy.Join, s"auto: $why; $kind join")
    }
  }
}
