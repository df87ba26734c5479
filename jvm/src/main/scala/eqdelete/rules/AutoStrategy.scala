package eqdelete.rules

import eqdelete.planning.DeletePlan

import org.apache.iceberg.Schema
import org.apache.spark.sql.eqdelete.compat.EqDeleteConf
import org.apache.spark.sql.eqdelete.compat.EqDeleteConf.Strategy
import org.apache.spark.sql.internal.SQLConf

/**
 * The strategy of a scan and why: the one set, or the cost model of `auto`, from Iceberg
 * metadata and Spark settings only (no data is read):
 *
 *  1. Fewer than `auto.minDataRows` rows in data files with equality deletes: native. A rewrite
 *     adds a planning pass and a job reading the delete files, which small scans do not repay.
 *  2. Up to `auto.filterMaxDeleteRows` delete rows, and an index of them that fits
 *     `filter.maxHeapFraction` of the driver's heap: filter. The sweeps (PERFORMANCE.md) show it
 *     fastest there: it reads the delete files once (and keeps the index across queries), ships
 *     it once per executor, and costs each row one cache-resident lookup.
 *  3. Otherwise: join. Broadcast while the delete side's estimate is under
 *     `join.broadcastMaxBytes` (and the same heap share), shuffled above it, which scales to
 *     delete sets of any size.
 *
 * A filter the user set is bounded the same way: an index that would not fit the driver is
 * replaced by the join, unless `filter.force` says otherwise.
 */
object AutoStrategy {

  def choose(plan: DeletePlan, readSchema: Schema, conf: SQLConf, driverHeapBytes: Long): (String, String) =
    EqDeleteConf.strategy(conf) match {
      case Strategy.Auto => auto(plan, readSchema, conf, driverHeapBytes)
      case Strategy.Filter if !EqDeleteConf.filterForce(conf) =>
        DriverMemory.filterOverBudget(plan, readSchema, conf, driverHeapBytes) match {
          case None => (Strategy.Filter, s"${EqDeleteConf.STRATEGY.key}=filter")
          case Some(why) => (Strategy.Join, s"${EqDeleteConf.STRATEGY.key}=filter, but $why: " +
            s"${joinKind(plan, readSchema, conf, driverHeapBytes)} join instead (${EqDeleteConf.FILTER_FORCE.key}=true overrides)")
        }
      case chosen => (chosen, s"${EqDeleteConf.STRATEGY.key}=$chosen")
    }

  private def auto(plan: DeletePlan, readSchema: Schema, conf: SQLConf, heap: Long): (String, String) = {
    val minRows = EqDeleteConf.autoMinDataRows(conf)
    val maxFilterRows = EqDeleteConf.autoFilterMaxDeleteRows(conf)
    val rows = plan.deleteRecords
    lazy val overBudget = DriverMemory.filterOverBudget(plan, readSchema, conf, heap)

    if (plan.rowsWithDeletes < minRows) {
      (Strategy.Native, s"auto: ${plan.rowsWithDeletes} rows in files with deletes < " +
        s"${EqDeleteConf.AUTO_MIN_DATA_ROWS.key}=$minRows; a rewrite costs more than it saves")
    } else if (rows <= maxFilterRows && overBudget.isEmpty) {
      (Strategy.Filter, s"auto: $rows delete rows <= ${EqDeleteConf.AUTO_FILTER_MAX_DELETE_ROWS.key}=$maxFilterRows " +
        s"and their index (~${DriverMemory.filterBytes(plan, readSchema) >> 20} MB with its broadcast copy) fits " +
        s"${EqDeleteConf.FILTER_MAX_HEAP_FRACTION.key} of the driver heap")
    } else {
      val why = if (rows > maxFilterRows) {
        s"$rows delete rows > ${EqDeleteConf.AUTO_FILTER_MAX_DELETE_ROWS.key}=$maxFilterRows"
      } else {
        overBudget.get
      }
      (Strategy.Join, s"auto: $why; ${joinKind(plan, readSchema, conf, heap)} join")
    }
  }

  private def joinKind(plan: DeletePlan, readSchema: Schema, conf: SQLConf, heap: Long): String = {
    val limit = DriverMemory.broadcastLimit(conf, heap)
    if (plan.deleteSets.forall(set => JoinPlanBuilder.broadcasts(set.files, DriverMemory.keyTypes(set, readSchema), limit))) {
      s"broadcast (delete side <= ${EqDeleteConf.JOIN_BROADCAST_MAX_BYTES.key} and the heap share)"
    } else {
      s"shuffled (delete side > ${EqDeleteConf.JOIN_BROADCAST_MAX_BYTES.key} or the heap share)"
    }
  }
}
