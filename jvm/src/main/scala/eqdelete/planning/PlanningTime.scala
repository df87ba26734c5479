package eqdelete.planning

import org.apache.spark.sql.eqdelete.compat.SparkInternals
import org.apache.spark.sql.execution.QueryExecution

/** How long a query takes to plan, for the benchmark: optimization, physical planning, and the scans' files. */
object PlanningTime {
  /** Seconds to plan `query` fully (its scans' files included), without running it. */
  def seconds(query: QueryExecution): Double = {
    val start = System.nanoTime()
    SparkInternals.planScans(query.executedPlan)
    (System.nanoTime() - start) / 1e9
  }

  /** Forgets every scan's kept deletes, so the next query plans its deletes from the manifests (cold). */
  def forgetKeptDeletes(): Unit = ScanDeletesCache.clear()
}
