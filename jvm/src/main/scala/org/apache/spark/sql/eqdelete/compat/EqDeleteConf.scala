package org.apache.spark.sql.eqdelete.compat

import java.util.Locale

import scala.jdk.CollectionConverters._
import scala.util.Try
import scala.util.control.NonFatal

import com.fasterxml.jackson.databind.ObjectMapper
import org.apache.spark.SparkConf
import org.apache.spark.internal.config.ConfigEntry
import org.apache.spark.network.util.ByteUnit
import org.apache.spark.sql.internal.SQLConf

/**
 * Every `spark.eqdelete.*` key, declared once with its doc string, default and what values it
 * accepts.
 *
 * Declared through `SQLConf.buildConf` (hence this package: the builder is Spark-private) so
 * that `SET key=value` validates values, `SET -v` lists the keys with their docs, and a bad
 * value fails with a message naming the key, the value and what is allowed. Each key's
 * [[EqDeleteConf.ValueRule]] is also exported (`rulesJson`) so the Python package checks a
 * session builder's values with the same rules before it starts a JVM.
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

  /** What the `maintain.liveIndex` key accepts; `true` and `false`, its values before `auto`, are always and never. */
  object LiveIndex {
    val Auto = "auto"
    val Always = "always"
    val Never = "never"
    val all: Seq[String] = Seq(Auto, Always, Never)
    val accepted: Seq[String] = all ++ Seq("true", "false")
  }

  /** What a key accepts. `describe` completes "must be ...". */
  sealed trait ValueRule { def kind: String; def describe: String }
  final case class BooleanRule() extends ValueRule { val kind = "boolean"; val describe = "true or false" }
  final case class ChoiceRule(values: Seq[String]) extends ValueRule {
    val kind = "choice"
    def describe: String = s"one of ${values.mkString(", ")}"
  }
  /** A whole number of at least `min`. */
  final case class CountRule(min: Long) extends ValueRule {
    val kind = "count"
    def describe: String = s"a whole number of at least $min"
  }
  /** A byte size such as 256m or 1g (plain numbers are bytes), or exactly -1 when `minusOne` says what -1 means. */
  final case class BytesRule(minusOne: String) extends ValueRule {
    val kind = "bytes"
    def describe: String = s"a size of zero or more bytes (such as 512k, 256m, 1g), or -1 ($minusOne)"
  }
  /** A number in (0, 1]. */
  final case class FractionRule() extends ValueRule {
    val kind = "fraction"
    val describe = "a number above 0 and at most 1"
  }
  /**
   * A directory on any storage an Iceberg FileIO writes, named whole (a scheme, or an absolute
   * path: the driver and the executors resolve a relative one each their own way), or empty for
   * the key's default.
   */
  final case class LocationRule() extends ValueRule {
    val kind = "location"
    val describe = "a directory with its scheme (such as s3://bucket/state) or an absolute path, or empty"
    def accepts(value: String): Boolean = value.isEmpty || value.startsWith("/") || value.matches("[A-Za-z][A-Za-z0-9+.-]*:.+")
  }

  private val declared = scala.collection.mutable.LinkedHashMap.empty[String, (ConfigEntry[_], ValueRule)]

  private def buildConf(key: String) = SQLConf.buildConf(s"spark.eqdelete.$key").version("0.1.0")

  private def declare[T](rule: ValueRule)(entry: ConfigEntry[T]): ConfigEntry[T] = {
    declared(entry.key) = (entry, rule)
    entry
  }

  private def mustBe(rule: ValueRule): String = s"must be ${rule.describe}"

  private def booleanConf(key: String, doc: String, default: Boolean): ConfigEntry[Boolean] =
    declare(BooleanRule())(buildConf(key).doc(doc).booleanConf.createWithDefault(default))

  /** One of `values`, compared without case or surrounding spaces. */
  private def choiceConf(key: String, doc: String, values: Seq[String], default: String): ConfigEntry[String] =
    declare(ChoiceRule(values))(buildConf(key).doc(doc).stringConf.transform(_.trim.toLowerCase(Locale.ROOT))
      .checkValues(values.toSet).createWithDefault(default))

  private def countConf(key: String, doc: String, default: Long, min: Long = 0): ConfigEntry[Long] = {
    val rule = CountRule(min)
    declare(rule)(buildConf(key).doc(doc).longConf.checkValue(_ >= rule.min, mustBe(rule)).createWithDefault(default))
  }

  private def bytesConf(key: String, doc: String, default: String, minusOne: String): ConfigEntry[Long] = {
    val rule = BytesRule(minusOne)
    declare(rule)(buildConf(key).doc(doc).bytesConf(ByteUnit.BYTE).checkValue(v => v >= 0 || v == -1, mustBe(rule))
      .createWithDefaultString(default))
  }

  private def fractionConf(key: String, doc: String, default: Double): ConfigEntry[Double] = {
    val rule = FractionRule()
    declare(rule)(buildConf(key).doc(doc).doubleConf.checkValue(v => v > 0 && v <= 1, mustBe(rule)).createWithDefault(default))
  }

  val ENABLED: ConfigEntry[Boolean] = booleanConf("enabled",
    "Master switch. When false, eqdelete leaves every Iceberg scan exactly as Iceberg " +
      "plans it, whatever the other spark.eqdelete.* keys say.",
    default = true)

  val STRATEGY: ConfigEntry[String] = choiceConf("strategy",
    "How equality deletes of an Iceberg scan are applied. 'filter': delete rows are read " +
      "by Spark tasks, indexed on the driver, broadcast, and checked per row by a predicate on the " +
      "scan (or the join, when their index would not fit spark.eqdelete.filter.maxHeapFraction). 'join': delete rows " +
      "become the build side of a left anti join. 'native': Iceberg applies them itself, " +
      "task by task. 'auto': chosen per scan by a cost model on Iceberg metadata (native, filter, " +
      "broadcast or shuffled join), see the spark.eqdelete.auto.* keys.",
    Strategy.all, Strategy.Auto)

  val AUTO_MIN_DATA_ROWS: ConfigEntry[Long] = countConf("auto.minDataRows",
    "'auto' leaves a scan native when its data files with equality deletes hold fewer rows " +
    "than this: a rewrite adds a job reading the delete files (and an index or a join), which a small " +
    "scan does not repay (the delete-rows sweep in PERFORMANCE.md).",
    200000L)

  val AUTO_FILTER_MAX_DELETE_ROWS: ConfigEntry[Long] = countConf("auto.filterMaxDeleteRows",
    "'auto' applies deletes with the filter strategy up to this many equality delete rows " +
    "(if their index also fits spark.eqdelete.filter.maxHeapFraction of the driver's heap), and " +
    "with the join above it: broadcast while the delete side is under " +
    "spark.eqdelete.join.broadcastMaxBytes, shuffled beyond. Calibrated by the sweeps and the scale " +
    "benchmark in PERFORMANCE.md (on 2 cores the filter was faster than the join up to 3x10^7 delete " +
    "rows, the largest point; with many executors the join's shuffle spreads where the filter's " +
    "index is built on the driver alone, so a lower value may suit).",
    30000000L)

  val JOIN_BROADCAST_MAX_BYTES: ConfigEntry[Long] = bytesConf("join.broadcastMaxBytes",
    "The join strategy broadcasts the delete rows when their estimated size (rows times " +
      "key width) is at most this and, three times over (the rows, Spark's hash relation of them and " +
      "its serialized copy), within spark.eqdelete.filter.maxHeapFraction of the driver's heap; above " +
      "it Spark's own join selection decides, shuffling both sides when the delete set is too large " +
      "to broadcast. -1 always leaves it to Spark.",
    default = "256m", minusOne = "always leave the choice to Spark")

  val FILTER_MAX_HEAP_FRACTION: ConfigEntry[Double] = fractionConf("filter.maxHeapFraction",
    "The share of the driver's heap the filter strategy's delete index may take, estimated from " +
      "the delete files' record counts before any is read (counting the index and its broadcast " +
      "copy). A scan whose index would not fit is read with the join strategy instead, also " +
      "under strategy=filter, and its decision says why. Also caps the join's broadcast side (three " +
      "times its estimate: rows, hash relation, serialized copy).",
    0.25)

  val FILTER_FORCE: ConfigEntry[Boolean] = booleanConf("filter.force",
    "With strategy=filter, build the delete index even when its estimate exceeds " +
      "spark.eqdelete.filter.maxHeapFraction of the driver's heap. If the driver then runs out " +
      "of memory the query fails with an error saying so; the session stays up.",
    default = false)

  val FILTER_BATCHED_LOOKUP: ConfigEntry[Boolean] = booleanConf("filter.batchedLookup",
    "Where a scan reads columnar batches (Iceberg's vectorized Parquet and ORC reads) and the " +
      "filter strategy's index is a hashed one (string, binary, decimal, boolean or composite keys), " +
      "look up a batch's keys together in a LookUpDeletedKeys node below the filter, so their cache " +
      "misses overlap, instead of one row at a time in the filter's predicate. The same rows either way.",
    default = true)

  val FILTER_CACHE_MAX_KEYS: ConfigEntry[Long] = countConf("filter.cacheMaxKeys",
    "The filter strategy keeps the delete indexes it builds (driver and executor memory, " +
    "about 64 bytes per key for one integral key column; for other keys about 60 bytes plus " +
    "the key's own: 9 per numeric or date column, 5 plus its length per string) for later queries " +
    "reading the same delete files, up to this many keys in all, dropping the least recently " +
    "used beyond it. 0 disables the cache.",
    4000000L)

  val MAINTAIN_MAX_ATTEMPTS: ConfigEntry[Long] = countConf("maintain.maxAttempts",
    "How many times one round of maintain (python -m eqdelete maintain, CALL eqdelete.system.maintain) " +
      "tries to commit its resolve when a concurrent commit conflicts with it (a compaction rewriting the " +
      "data files it read, say), starting again from the table's newest snapshot each time. A round that " +
      "runs out of attempts commits nothing and leaves the deletes to the next round.",
    5L, min = 1)

  val MAINTAIN_RETRY_WAIT_MILLIS: ConfigEntry[Long] = countConf("maintain.retryWaitMillis",
    "Milliseconds maintain waits before its first retry after a conflict; each further retry of the " +
      "round waits twice as long as the one before (at most a minute).",
    1000L)

  val MAINTAIN_COMPACT_POSITION_DELETE_FILES: ConfigEntry[Long] = countConf("maintain.compactPositionDeleteFiles",
    "On a format v2 table, once a reader of some data file would open at least this many position delete " +
      "files (each round of maintain adds one to every data file of a partition it resolves in), maintain " +
      "compacts that partition: the partition-wide files become each data file's own, merged with as few of its " +
      "older ones as keep it at half this many; a data file no new delete names keeps its files, so a compaction " +
      "costs what was deleted since the last one (Iceberg's rewrite_position_delete_files rewrites them all). 0 never " +
      "compacts. (Format v3 keeps one deletion vector per data file, which every resolve merges into: " +
      "nothing piles up.)",
    10L)

  val MAINTAIN_COMPACT_DATA_BYTES_PER_HOUR: ConfigEntry[Long] = bytesConf("maintain.compactDataBytesPerHour",
    "How many bytes of data files maintain may rewrite per table in any hour, with Iceberg's rewrite_data_files, to " +
      "drop the rows deleted from them once a data file's deleted share reaches " +
      "spark.eqdelete.maintain.compactDataDeadRatio. 0 never rewrites data files (maintain then only resolves " +
      "equality deletes and compacts position delete files). The hour's bytes are read from the table's own " +
      "snapshots (those marked eqdelete.data-compaction-id), so the budget holds across restarts and processes.",
    "0", minusOne = "no limit")

  val MAINTAIN_COMPACT_DATA_DEAD_RATIO: ConfigEntry[Double] = fractionConf("maintain.compactDataDeadRatio",
    "The share of a data file's rows its deletes must remove before maintain rewrites it (when " +
      "spark.eqdelete.maintain.compactDataBytesPerHour allows): Iceberg's delete-ratio-threshold, which counts " +
      "the deletes scoped to one data file (deletion vectors on format v3; on v2 the position delete files " +
      "maintain's compaction leaves, one per data file).",
    0.3)

  val MAINTAIN_LIVE_INDEX: ConfigEntry[String] = choiceConf("maintain.liveIndex",
    "Whether a long-running maintain (python -m eqdelete maintain without --once, maintain --tables) keeps, per " +
      "table, an index of the live rows by key on the executors' local disks (RocksDB, about 14-20 bytes per key; " +
      "none on the driver), brought forward each round from the table's changes, so a round looks its delete rows up " +
      "and reads only the data files added or changed since the last one, instead of every data file its deletes may " +
      "touch. 'auto': each round takes the cheaper way by its metadata (the rows of the data files it would read against " +
      "its delete rows: the index pays on large tables with keys spread over many files, for rounds small against them; " +
      "one way must be 1.5x ahead before a round drops the index it holds or builds one it lacks). " +
      "'always': every round through the index; 'never': none kept ('true' and 'false' are read " +
      "as always and never). It is checkpointed (spark.eqdelete.state.location): a lost executor's stores load " +
      "elsewhere, and a restart restores the last saved version; it is built from the table on a first start, and " +
      "again after a rollback or an expiry it cannot see past. A round run once (--once, CALL " +
      "eqdelete.system.maintain, Spark Connect) never keeps one.",
    LiveIndex.accepted, LiveIndex.Auto)

  val MAINTAIN_LIVE_INDEX_STORES: ConfigEntry[Long] = countConf("maintain.liveIndexStores",
    "How many stores (one RocksDB each, on one executor) a kept index of the live rows is split into by key hash; " +
      "0 is the session's default parallelism, one per core. A change takes effect when the index is next built " +
      "(a round that finds another count builds it again).",
    0L)

  val CHANGES_ROW_IMAGES: ConfigEntry[Boolean] = booleanConf("changes.rowImages",
    "Whether the changes of a table (eqdelete_changes, eqdelete.changes, the changes stream) keep its live rows by key " +
      "on the executors' disks (RocksDB, as the kept live-row index), so an upsert commit's deleted rows are looked up " +
      "by its delete keys instead of read from the data files. The first such commit read builds them from a full " +
      "read of its parent; later commits bring them forward at what they changed. Only commits whose deletes are " +
      "exact use them (equality deletes global or partitioned by their key columns, on top-level keys of exactly " +
      "compared types, no delete by position in older files); another kind leaves them behind until a later read builds them again. Worth it for a " +
      "long-running stream or session over a large table of upserts; checkpointed (spark.eqdelete.state.location), so " +
      "a lost executor or a restart loads them instead of building them again.",
    false)

  val SINK_KEPT_ROWS: ConfigEntry[Boolean] = booleanConf("sink.keptRows",
    "Whether apply_changes with keys keeps the copy's live rows by those keys on the executors' disks (RocksDB, as the " +
      "changes' kept row images), so a batch finds the rows it removes by looking their keys up instead of reading " +
      "the copy: a batch then costs its rows, not the copy's. The first apply builds them from a full read of the " +
      "copy; each apply brings them forward by its own commit, and by appends of others; any other commit to the " +
      "copy (a compaction, another writer's deletes, a schema change) makes the next apply build them again. Worth " +
      "it for a stream applying small batches to a large copy; checkpointed (spark.eqdelete.state.location), so a " +
      "lost executor or a restart loads them instead of building them again.",
    false)

  val STATE_LOCATION: ConfigEntry[String] = declare(LocationRule())(buildConf("state.location").doc(
    "Where kept state is checkpointed: maintain's kept index of the live rows, the changes' kept row images and " +
      "the copy's rows apply_changes keeps " +
      "(a stream's images go to its own checkpoint location unless this is set). Any directory the table's " +
      "FileIO can write (s3://, gs://, abfs://, hdfs://, a local or mounted path), with the catalog's own " +
      "credentials; each table's state in a directory named by its UUID. Empty: in each table's own location, " +
      "under _eqdelete_state (a hidden directory Iceberg's orphan file removal passes over). Any executor loads a " +
      "store from here, at the version its task needs, and a restart loads the last saved version.")
    .stringConf.transform(_.trim).checkValue(LocationRule().accepts, mustBe(LocationRule())).createWithDefault(""))

  val STATE_DELTAS_PER_SNAPSHOT: ConfigEntry[Long] = countConf("state.deltasPerSnapshot",
    "How many versions of a kept store are checkpointed as deltas (what a step changed) after its last snapshot " +
      "before a step uploads a new snapshot (only the RocksDB files not uploaded before): fewer make a load replay " +
      "less, more make steps upload less.",
    10L, min = 1)

  val CHANGES_ROW_IMAGE_STORES: ConfigEntry[Long] = countConf("changes.rowImageStores",
    "How many stores (one RocksDB each, on one executor) kept row images (the changes', and a copy's kept by " +
      "apply_changes) are split into by key hash; 0 is the session's default parallelism. Takes effect when a " +
      "table's row images are next built.",
    0L)

  /**
   * A table property eqdelete reads (`ALTER TABLE ... SET TBLPROPERTIES`), so each table of a
   * lakehouse can be maintained its own way; declared here with the session keys, and documented
   * from here the same way.
   */
  final case class TableProperty(key: String, default: String, rule: ValueRule, doc: String)

  private val tableDeclared = scala.collection.mutable.ArrayBuffer.empty[TableProperty]

  private def tableProperty(key: String, default: String, rule: ValueRule, doc: String): TableProperty = {
    val property = TableProperty(key, default, rule, doc)
    tableDeclared += property
    property
  }

  val TABLE_MAINTAIN_ENABLED: TableProperty = tableProperty("eqdelete.maintain.enabled", "true", BooleanRule(),
    "Whether maintain --tables keeps this table resolved; false lets it be (status still shows its debt). " +
      "A round asked for by name (maintain TABLE, CALL eqdelete.system.maintain) runs all the same.")

  val TABLE_MAINTAIN_INTERVAL_SECONDS: TableProperty = tableProperty("eqdelete.maintain.interval-seconds",
    "maintain's --interval", CountRule(0),
    "Seconds between the starts of two rounds on this table under maintain --tables.")

  val TABLE_MAINTAIN_MIN_EQUALITY_DELETE_FILES: TableProperty = tableProperty("eqdelete.maintain.min-equality-delete-files",
    "1", CountRule(1),
    "A round resolves only once at least this many equality delete files are live (fewer, larger resolves " +
      "on a table whose readers can wait); below it the round only compacts, if due.")

  val TABLE_MAINTAIN_COMPACT_POSITION_DELETE_FILES: TableProperty = tableProperty(
    "eqdelete.maintain.compact-position-delete-files", MAINTAIN_COMPACT_POSITION_DELETE_FILES.key, CountRule(0),
    s"This table's own ${MAINTAIN_COMPACT_POSITION_DELETE_FILES.key}.")

  val TABLE_MAINTAIN_COMPACT_DATA_BYTES_PER_HOUR: TableProperty = tableProperty(
    "eqdelete.maintain.compact-data-bytes-per-hour", MAINTAIN_COMPACT_DATA_BYTES_PER_HOUR.key, CountRule(0),
    s"This table's own ${MAINTAIN_COMPACT_DATA_BYTES_PER_HOUR.key}, in bytes.")

  val TABLE_MAINTAIN_COMPACT_DATA_DEAD_RATIO: TableProperty = tableProperty(
    "eqdelete.maintain.compact-data-dead-ratio", MAINTAIN_COMPACT_DATA_DEAD_RATIO.key, FractionRule(),
    s"This table's own ${MAINTAIN_COMPACT_DATA_DEAD_RATIO.key}.")

  /** Every table property eqdelete reads. */
  def tableProperties: Seq[TableProperty] = tableDeclared.toVector

  /**
   * The value of `property` in a table's `properties`, None when unset; a value its rule refuses
   * fails naming the table, the property and what it accepts.
   */
  def tableValue(table: String, properties: java.util.Map[String, String], property: TableProperty): Option[String] =
    Option(properties.get(property.key)).map(_.trim).map { value =>
      val valid = property.rule match {
        case BooleanRule() => value.equalsIgnoreCase("true") || value.equalsIgnoreCase("false")
        case CountRule(min) => Try(value.toLong).toOption.exists(_ >= min)
        case FractionRule() => Try(value.toDouble).toOption.exists(v => v > 0 && v <= 1)
        case _ => true
      }
      if (!valid) {
        throw new IllegalArgumentException(
          s"eqdelete: invalid value '$value' for table property ${property.key} of $table: ${mustBe(property.rule)}")
      }
      value
    }

  /** Every key, for docs and for validating a session's values up front. */
  def all: Seq[ConfigEntry[_]] = declared.values.map(_._1).toVector

  /** The strategy names, for the Python side (py4j reaches top-level members only). */
  def strategyNames: java.util.List[String] = Strategy.all.asJava

  def enabled(conf: SQLConf): Boolean = conf.getConf(ENABLED)
  def strategy(conf: SQLConf): String = conf.getConf(STRATEGY)
  def autoMinDataRows(conf: SQLConf): Long = conf.getConf(AUTO_MIN_DATA_ROWS)
  def autoFilterMaxDeleteRows(conf: SQLConf): Long = conf.getConf(AUTO_FILTER_MAX_DELETE_ROWS)
  def joinBroadcastMaxBytes(conf: SQLConf): Long = conf.getConf(JOIN_BROADCAST_MAX_BYTES)
  def filterMaxHeapFraction(conf: SQLConf): Double = conf.getConf(FILTER_MAX_HEAP_FRACTION)
  def filterForce(conf: SQLConf): Boolean = conf.getConf(FILTER_FORCE)
  def filterBatchedLookup(conf: SQLConf): Boolean = conf.getConf(FILTER_BATCHED_LOOKUP)
  def filterCacheMaxKeys(conf: SQLConf): Long = conf.getConf(FILTER_CACHE_MAX_KEYS)
  def maintainMaxAttempts(conf: SQLConf): Long = conf.getConf(MAINTAIN_MAX_ATTEMPTS)
  def maintainRetryWaitMillis(conf: SQLConf): Long = conf.getConf(MAINTAIN_RETRY_WAIT_MILLIS)
  def maintainCompactPositionDeleteFiles(conf: SQLConf): Long = conf.getConf(MAINTAIN_COMPACT_POSITION_DELETE_FILES)
  def maintainCompactDataBytesPerHour(conf: SQLConf): Long = conf.getConf(MAINTAIN_COMPACT_DATA_BYTES_PER_HOUR)
  def maintainCompactDataDeadRatio(conf: SQLConf): Double = conf.getConf(MAINTAIN_COMPACT_DATA_DEAD_RATIO)
  def maintainLiveIndex(conf: SQLConf): String = conf.getConf(MAINTAIN_LIVE_INDEX)
  def maintainLiveIndexStores(conf: SQLConf): Long = conf.getConf(MAINTAIN_LIVE_INDEX_STORES)
  def changesRowImages(conf: SQLConf): Boolean = conf.getConf(CHANGES_ROW_IMAGES)
  def changesRowImageStores(conf: SQLConf): Long = conf.getConf(CHANGES_ROW_IMAGE_STORES)
  def sinkKeptRows(conf: SQLConf): Boolean = conf.getConf(SINK_KEPT_ROWS)
  def stateLocation(conf: SQLConf): String = conf.getConf(STATE_LOCATION)
  def stateDeltasPerSnapshot(conf: SQLConf): Int = conf.getConf(STATE_DELTAS_PER_SNAPSHOT).min(Int.MaxValue).toInt

  /**
   * Reads every key of `conf`, so a bad value given before the session existed
   * (spark-defaults.conf, a builder) fails now, with the key named, not at the first query.
   */
  def validate(conf: SQLConf): Unit = all.foreach(entry => conf.getConf(entry))

  /** One line naming the key, the value and what it accepts; None when the value is fine. */
  def problem(key: String, value: String): Option[String] = declared.get(key).flatMap { case (entry, rule) =>
    val valid = try { entry.valueConverter(value); true } catch { case NonFatal(_) => false }
    if (valid) None else Some(s"invalid value '$value' for $key: ${mustBe(rule)}")
  }

  /**
   * Checks the spark.eqdelete.* values of the running SparkContext's configuration
   * (spark-defaults.conf, --conf, a builder's options), throwing one clear line for a bad one.
   * Called when the extension is applied, before the session's own configuration is built:
   * a bad value found later, while Spark builds the session state, fails every access to that
   * state, and PySpark's error reporting, which reads it, then never returns.
   */
  def validateSparkConf(): Unit = SparkInternals.activeContext.foreach(sc => validateSparkConf(sc.conf))

  def validateSparkConf(conf: SparkConf): Unit =
    conf.getAll.iterator.filter(_._1.startsWith("spark.eqdelete.")).flatMap { case (k, v) => problem(k, v) }
      .toSeq.headOption.foreach(message => throw new IllegalArgumentException(s"eqdelete: $message"))

  /** The config reference as Markdown, generated so docs cannot drift from the code. */
  def markdownReference: String = {
    val rows = declared.values.map { case (entry, rule) =>
      val doc = entry.doc.replace("|", "\\|")
      s"| `${entry.key}` | `${entry.defaultValueString}` | ${rule.describe.capitalize}. $doc |"
    }
    val properties = tableDeclared.map { p =>
      val default = if (p.default.contains(' ')) p.default else s"`${p.default}`"
      s"| `${p.key}` | $default | ${p.rule.describe.capitalize}. ${p.doc.replace("|", "\\|")} |"
    }
    ("| Key | Default | Meaning |" +: "| --- | --- | --- |" +: rows.toSeq).mkString("", "\n", "\n") +
      "\n## Table properties\n\nSet per table with `ALTER TABLE t SET TBLPROPERTIES ('key' = 'value')`; read by " +
      "`maintain` and `status` each time they look at the table, so a change takes effect at the next round.\n\n" +
      ("| Property | Default | Meaning |" +: "| --- | --- | --- |" +: properties.toSeq).mkString("", "\n", "\n")
  }

  /**
   * Every key's rule as JSON, for the Python package (python/eqdelete/conf_rules.json),
   * generated so the two sides cannot drift: `{"key": {"kind", "describe", "default", ...}}`.
   */
  def rulesJson: String = {
    val keys = new java.util.LinkedHashMap[String, java.util.Map[String, AnyRef]]()
    declared.values.foreach { case (entry, rule) =>
      val fields = new java.util.LinkedHashMap[String, AnyRef]()
      fields.put("kind", rule.kind)
      fields.put("describe", rule.describe)
      fields.put("default", entry.defaultValueString)
      rule match {
        case ChoiceRule(values) => fields.put("values", values.asJava)
        case CountRule(min) => fields.put("min", java.lang.Long.valueOf(min))
        case _ =>
      }
      keys.put(entry.key, fields)
    }
    new ObjectMapper().writerWithDefaultPrettyPrinter().writeValueAsString(keys) + "\n"
  }
}
