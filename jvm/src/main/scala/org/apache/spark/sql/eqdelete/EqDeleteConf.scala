package org.apache.spark.sql.eqdelete

import java.util.Locale

import scala.jdk.CollectionConverters._

import org.apache.spark.internal.config.ConfigEntry
import org.apache.spark.network.util.ByteUnit
import org.apache.spark.sql.internal.SQLConf

/**
 * Every `spark.eqdelete.*` key, declared once with its doc string and default.
 *
 * Declared through `SQLConf.buildConf` (hence this package: the builder is Spark-private) so
 * that `SET key=value` validates values, `SET -v` lists the keys with their docs, and a bad
 * value fails with a message naming the key, the value and what is allowed.
 */
object EqDeleteConf {

  /** Strategies a scan can be read with; see the `strategy` key. */
  object Strategy {
    val Auto = "auto"
    val Filter = "filter"
    val Join = "join"
    val Native = "native"
    val all: Seq[String] = Seq(Auto, Filter, Join, Native)
  }

  private def buildConf(key: String) = SQLConf.buildConf(s"spark.eqdelete.$key")

  /** A count: a long of zero or more. */
  private def countConf(key: String, doc: String, default: Long): ConfigEntry[Long] =
    buildConf(key).doc(doc).version("0.1.0").longConf.checkValue(_ >= 0, "must be zero or more").createWithDefault(default)

  val ENABLED: ConfigEntry[Boolean] = buildConf("enabled")
    .doc("Master switch. When false, eqdelete leaves every Iceberg scan exactly as Iceberg " +
      "plans it, whatever the other spark.eqdelete.* keys say.")
    .version("0.1.0")
    .booleanConf
    .createWithDefault(true)

  val STRATEGY: ConfigEntry[String] = buildConf("strategy")
    .doc("How equality deletes of an Iceberg scan are applied. 'filter': delete rows are read " +
      "once on the driver and compiled into predicates on the scan. 'join': delete rows " +
      "become the build side of a left anti join. 'native': Iceberg applies them itself, " +
      "task by task. 'auto': chosen per scan by a cost model on Iceberg metadata (native, filter, " +
      "broadcast or shuffled join), see the spark.eqdelete.auto.* keys.")
    .version("0.1.0")
    .stringConf
    .transform(_.trim.toLowerCase(Locale.ROOT))
    .checkValues(Strategy.all.toSet)
    .createWithDefault(Strategy.Auto)

  val AUTO_MIN_DATA_ROWS: ConfigEntry[Long] = countConf("auto.minDataRows",
    "'auto' leaves a scan native when its data files with equality deletes hold fewer rows " +
    "than this: a rewrite adds a planning pass and a job reading the delete files, which a small " +
    "scan does not repay (the delete-rows sweep in PERFORMANCE.md).",
    200000L)

  val AUTO_FILTER_MAX_DELETE_ROWS: ConfigEntry[Long] = countConf("auto.filterMaxDeleteRows",
    "'auto' applies deletes with the filter strategy up to this many equality delete rows " +
    "(if their index also fits a quarter of the driver's heap), and with the join above it: " +
    "broadcast while the delete side is under spark.eqdelete.join.broadcastMaxBytes, shuffled " +
    "beyond. Calibrated by the sweeps in PERFORMANCE.md.",
    2000000L)

  val JOIN_BROADCAST_MAX_BYTES: ConfigEntry[Long] = buildConf("join.broadcastMaxBytes")
    .doc("The join strategy broadcasts the delete rows when their estimated size (rows times " +
      "key width) is at most this; above it Spark's own join selection decides, shuffling " +
      "both sides when the delete set is too large to broadcast. -1 always leaves it to Spark.")
    .version("0.1.0")
    .bytesConf(ByteUnit.BYTE)
    .createWithDefaultString("256m")

  val FILTER_CACHE_MAX_KEYS: ConfigEntry[Long] = countConf("filter.cacheMaxKeys",
    "The filter strategy keeps the delete indexes it builds (driver and executor memory, " +
    "about 64 bytes per key for one integral key column, 160 for other keys) for later queries " +
    "reading the same delete files, up to this many keys in all, dropping the least recently " +
    "used beyond it. 0 disables the cache.",
    4000000L)

  /** Every key, for docs and for validating a session's values up front. */
  def all: Seq[ConfigEntry[_]] = Seq(ENABLED, STRATEGY, AUTO_MIN_DATA_ROWS, AUTO_FILTER_MAX_DELETE_ROWS,
    JOIN_BROADCAST_MAX_BYTES, FILTER_CACHE_MAX_KEYS)

  /** The strategy names, for the Python side (py4j reaches top-level members only). */
  def strategyNames: java.util.List[String] = Strategy.all.asJava

  def enabled(conf: SQLConf): Boolean = conf.getConf(ENABLED)
  def strategy(conf: SQLConf): String = conf.getConf(STRATEGY)
  def autoMinDataRows(conf: SQLConf): Long = conf.getConf(AUTO_MIN_DATA_ROWS)
  def autoFilterMaxDeleteRows(conf: SQLConf): Long = conf.getConf(AUTO_FILTER_MAX_DELETE_ROWS)
  def joinBroadcastMaxBytes(conf: SQLConf): Long = conf.getConf(JOIN_BROADCAST_MAX_BYTES)
  def filterCacheMaxKeys(conf: SQLConf): Long = conf.getConf(FILTER_CACHE_MAX_KEYS)

  /**
   * Reads every key of `conf`, so a bad value given before the session existed
   * (spark-defaults.conf, a builder) fails now, with the key named, not at the first query.
   */
  def validate(conf: SQLConf): Unit = all.foreach(entry => conf.getConf(entry))

  /** The config reference as Markdown, generated so docs cannot drift from the code. */
  def markdownReference: String = {
    val rows = all.map { entry =>
      val doc = entry.doc.replace("|", "\\|")
      s"| `${entry.key}` | `${entry.defaultValueString}` | $doc |"
    }
    ("| Key | Default | Meaning |" +: "| --- | --- | --- |" +: rows).mkString("", "\n", "\n")
  }
}
