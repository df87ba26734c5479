package org.apache.spark.sql.eqdelete.compat

import java.util.concurrent.ConcurrentHashMap

import com.codahale.metrics.{Gauge, MetricRegistry}
import org.apache.spark.SparkContext
import org.apache.spark.metrics.source.Source

/**
 * What maintain did, in Spark's metrics system (source `eqdelete`), so any sink configured for
 * the application (`spark.metrics.conf.*.sink.*`: Prometheus's servlet, JMX, CSV, Graphite)
 * exports it beside Spark's own: counters of rounds, commits, failures, conflicts, rows resolved
 * and files removed, compacted and written, data files compacted and their bytes, a timer of rounds, and per table gauges of the lag
 * after its last round and of its kept index of the live rows (entries, bytes). Registered once per SparkContext, on the driver, where rounds run.
 * (Spark's `Source` is private to Spark: hence here, in the compat package.)
 */
final class MaintainMetricsSource private () extends Source {
  override val sourceName: String = "eqdelete"
  override val metricRegistry: MetricRegistry = new MetricRegistry

  private def counter(name: String) = metricRegistry.counter(MetricRegistry.name("maintain", name))
  val rounds = counter("rounds")
  val roundsCommitted = counter("roundsCommitted")
  val roundsFailed = counter("roundsFailed")
  val conflicts = counter("conflicts")
  val rowsResolved = counter("rowsResolved")
  val equalityDeleteFilesRemoved = counter("equalityDeleteFilesRemoved")
  val positionDeleteFilesWritten = counter("positionDeleteFilesWritten")
  val deletionVectorsWritten = counter("deletionVectorsWritten")
  val positionDeleteFilesCompacted = counter("positionDeleteFilesCompacted")
  val dataFilesCompacted = counter("dataFilesCompacted")
  val dataBytesRewritten = counter("dataBytesRewritten")
  val roundTime = metricRegistry.timer(MetricRegistry.name("maintain", "roundTime"))

  private val tableValues = new ConcurrentHashMap[(String, String), java.lang.Double]()

  /** The lag of `table` after its last round, as a gauge named after the table. */
  def lag(table: String, seconds: Double): Unit = tableGauge("lagSeconds", table, seconds)

  /** The entries and bytes of `table`'s kept index of its live rows after its last round. */
  def liveIndex(table: String, entries: Long, bytes: Long): Unit = {
    tableGauge("liveIndexEntries", table, entries.toDouble)
    tableGauge("liveIndexBytes", table, bytes.toDouble)
  }

  /** Sets the gauge `maintain.<name>.<table>`, registering it the first time. */
  private def tableGauge(name: String, table: String, value: Double): Unit = {
    if (tableValues.put((name, table), value) == null) {
      val gauge: Gauge[java.lang.Double] = () => tableValues.get((name, table))
      metricRegistry.register(MetricRegistry.name("maintain", name, table), gauge)
    }
  }
}

object MaintainMetricsSource {
  private val sources = new ConcurrentHashMap[SparkContext, MaintainMetricsSource]()

  /** The source of `context`, registered with its metrics system the first time. */
  def of(context: SparkContext): MaintainMetricsSource = sources.computeIfAbsent(context, { c =>
    val source = new MaintainMetricsSource
    c.env.metricsSystem.registerSource(source)
    // Let go with the context, so a stopped application's source is not kept.
    sources.keySet().removeIf(_.isStopped)
    source
  })
}
