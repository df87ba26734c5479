package eqdelete.rule

import scala.jdk.CollectionConverters._
import scala.util.Try

import org.apache.iceberg.Table
import org.apache.spark.sql.eqdelete.compat.IcebergInternals
import org.apache.spark.sql.catalyst.expressions.{Attribute, MetadataAttribute}
import org.apache.spark.sql.util.CaseInsensitiveStringMap

/**
 * The reads eqdelete rewrites, as an allowlist: a batch read of one snapshot (current, time
 * travel, branch or tag) whose every read option and metadata column eqdelete models. Anything
 * else keeps Iceberg's own reader, so an option or column a later Iceberg adds is rewritten only
 * once someone has modelled it (a blocklist would rewrite it, rightly or not).
 */
object ReadAllowlist {
  /** Metadata columns the rewritten scans return as Iceberg does (they read the same files with Iceberg's readers). */
  val MetadataColumns: Set[String] =
    Set("_file", "_pos", "_spec_id", "_partition", "_row_id", "_last_updated_sequence_number")

  /** Iceberg's session setting for the write-audit-publish branch (SparkSQLProperties.WAP_BRANCH). */
  val WapBranchKey = "spark.wap.branch"

  /** Options that tune how Iceberg splits, reads or reports a scan; the rows stay the same. */
  private val Tuning = Set("split-size", "lookback", "file-open-cost", "vectorization-enabled", "batch-size",
    "locality", "aggregate-push-down-enabled", "derive-stats-from-manifest-enabled")

  /**
   * Options naming the table or Spark's time travel: Spark loads the table with them (or, as
   * DataFrameReader.table() on Spark 3.5, ignores them), and Iceberg's scans never read them.
   */
  private val Loading = Set("path", "versionasof", "timestampasof")

  /**
   * Options only Iceberg's streaming reads take (a spark.datasource.iceberg.* session setting
   * puts them on every batch read of the DataFrameReader too, where Iceberg ignores them).
   */
  private val StreamingOnly = Set("streaming-skip-delete-snapshots", "streaming-skip-overwrite-snapshots",
    "stream-from-timestamp", "streaming-max-files-per-micro-batch", "streaming-max-rows-per-micro-batch")

  /** Options choosing a snapshot: modelled when they choose the one the table was loaded at. */
  private val SnapshotChoice = Set("snapshot-id", "as-of-timestamp", "branch", "tag")

  /** Options making an incremental scan, which applies no deletes at all. */
  private val Incremental = Seq("start-snapshot-id", "end-snapshot-id", "start-timestamp", "end-timestamp")

  /**
   * Why eqdelete does not rewrite a read of `table` at `snapshotId` that uses the relation's
   * columns `used` with `options`, or None when it models every part of it.
   */
  def unmodelled(used: Seq[Attribute], options: CaseInsensitiveStringMap, table: Table, snapshotId: Long,
      wapBranch: Option[String]): Option[String] =
    metadataColumn(used)
      .orElse(option(options.asCaseSensitiveMap().asScala.toMap, table, snapshotId))
      .orElse(writeAuditPublish(wapBranch, table, snapshotId))

  /**
   * Iceberg (1.10 to 1.12) reads the session's write-audit-publish branch (spark.wap.branch) when
   * the table has it, which the snapshot Spark loaded may not say (Spark 3.5 and 4.0 modules).
   */
  private def writeAuditPublish(wapBranch: Option[String], table: Table, snapshotId: Long): Option[String] =
    wapBranch.filter(_.nonEmpty).flatMap(b => Option(table.refs().get(b)).map(b -> _.snapshotId()))
      .collect { case (branch, head) if head != snapshotId =>
        s"the session sets spark.wap.branch=$branch, which Iceberg may read instead of snapshot $snapshotId"
      }

  private def metadataColumn(used: Seq[Attribute]): Option[String] =
    used.filter(a => MetadataAttribute.isValid(a.metadata)).map(_.name).find(!MetadataColumns.contains(_)).map {
      case "_deleted" => "reads the _deleted metadata column (Iceberg returns deleted rows marked, not dropped)"
      case other => s"reads the metadata column $other, which eqdelete does not model"
    }

  private def option(options: Map[String, String], table: Table, snapshotId: Long): Option[String] = {
    val keys = options.keys.map(k => k.toLowerCase(java.util.Locale.ROOT) -> k).toMap
    def otherSnapshot(key: String): Option[String] = {
      val value = options(keys(key))
      val chosen = chosenSnapshot(key, value, table)
      if (chosen.contains(snapshotId)) None
      else Some(s"read option $key=$value chooses snapshot ${chosen.getOrElse("none")}, not the snapshot " +
        s"$snapshotId the table was loaded at")
    }
    Incremental.find(keys.contains).map(k => s"incremental read ($k): Iceberg applies no deletes to the rows it appends")
      .orElse(keys.collectFirst {
        case (k, original) if !Tuning(k) && !Loading(k) && !StreamingOnly(k) && !SnapshotChoice(k) =>
          s"read option '$original' is not one eqdelete models"
      })
      .orElse(keys.keys.filter(SnapshotChoice).toSeq.sorted.flatMap(otherSnapshot).headOption)
  }

  private def chosenSnapshot(option: String, value: String, table: Table): Option[Long] = Try(option match {
    case "snapshot-id" => Some(value.toLong)
    case "as-of-timestamp" => Some(IcebergInternals.snapshotIdAsOfTime(table, value.toLong))
    case "branch" | "tag" => Option(table.refs().get(value)).map(_.snapshotId())
  }).toOption.flatten
}
