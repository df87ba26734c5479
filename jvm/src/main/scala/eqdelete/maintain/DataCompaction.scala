package eqdelete.maintain

import scala.collection.mutable
import scala.jdk.CollectionConverters._
import scala.util.Using

import org.apache.iceberg.{FileContent, Table}
import org.apache.spark.sql.eqdelete.compat.IcebergInternals

/**
 * Data compaction when it pays: once deletes remove `compactDataDeadRatio` of a data file's
 * rows, maintain rewrites it (Iceberg's `rewrite_data_files`, limited to such files) so readers
 * stop reading dead rows, within `compactDataBytesPerHour` bytes per table. Decided here from
 * metadata; the hour's bytes come from the table's own snapshots (those carrying [[Key]]), so the
 * budget holds across restarts and across processes maintaining the same table.
 */
object DataCompaction {
  /** The snapshot summary property marking a data compaction's commit. */
  val Key = "eqdelete.data-compaction-id"

  private val HourMillis = 3600L * 1000L

  /** The data files past the dead-row share, as Iceberg's `delete-ratio-threshold` counts them. */
  final case class Candidates(files: Int, bytes: Long, largestBytes: Long)

  /** What a data compaction would do now. */
  sealed trait Plan { def describe: String }
  object Plan {
    case object Off extends Plan { val describe = "off" }
    case object NothingDue extends Plan { val describe = "no data file past the dead-row share" }
    final case class OverBudget(due: Candidates, remaining: Long) extends Plan {
      def describe: String = s"${due.files} data file(s) due (${due.bytes} bytes), but ${math.max(0L, remaining)} byte(s) " +
        "left of this hour's budget"
    }
    /** Rewrite up to `maxFiles` of the due files (None: all of them). */
    final case class Rewrite(due: Candidates, maxFiles: Option[Int]) extends Plan {
      def describe: String = s"compact ${maxFiles.map(n => s"$n of ").getOrElse("")}${due.files} data file(s) past the dead-row share"
    }
  }

  def plan(table: Table, settings: TableSettings, nowMillis: Long): Plan =
    if (settings.compactDataBytesPerHour == 0) Plan.Off
    else Option(table.currentSnapshot()) match {
      case None => Plan.NothingDue
      case Some(snapshot) =>
        val due = candidates(table, snapshot.snapshotId(), settings.compactDataDeadRatio)
        if (due.files == 0) Plan.NothingDue
        else if (settings.compactDataBytesPerHour < 0) Plan.Rewrite(due, None)
        else {
          val remaining = settings.compactDataBytesPerHour - bytesWithinHour(table, nowMillis)
          // Iceberg picks which due files to rewrite: a count whose largest files fit what is left.
          val fitting = if (due.largestBytes <= 0) due.files.toLong else remaining / due.largestBytes
          if (fitting <= 0) Plan.OverBudget(due, remaining)
          else Plan.Rewrite(due, if (fitting >= due.files) None else Some(fitting.toInt))
        }
    }

  /**
   * The data files of `snapshotId` whose deletes scoped to that one file (deletion vectors,
   * file-scoped position deletes; what Iceberg's planner counts) remove at least `ratio` of its
   * rows. On format v2, maintain's own position delete files cover a partition until its
   * compaction splits them into each data file's own: only then do they count.
   */
  def candidates(table: Table, snapshotId: Long, ratio: Double): Candidates = {
    val seen = mutable.HashSet.empty[String]
    var files, bytes, largest = 0L
    Using.resource(table.newScan().useSnapshot(snapshotId).planFiles()) { tasks =>
      tasks.asScala.foreach { task =>
        val file = task.file()
        if (seen.add(file.location()) && file.recordCount() > 0) {
          val dead = task.deletes().asScala
            .filter(d => d.content() == FileContent.POSITION_DELETES && IcebergInternals.isFileScoped(d))
            .map(_.recordCount()).sum
          if (math.min(dead, file.recordCount()).toDouble / file.recordCount() >= ratio) {
            files += 1
            bytes += file.fileSizeInBytes()
            largest = math.max(largest, file.fileSizeInBytes())
          }
        }
      }
    }
    Candidates(files.toInt, bytes, largest)
  }

  /** Bytes of data files eqdelete's data compactions rewrote in the hour before `nowMillis`. */
  def bytesWithinHour(table: Table, nowMillis: Long): Long =
    table.snapshots().asScala.iterator
      .filter(s => s.timestampMillis() > nowMillis - HourMillis && s.summary().containsKey(Key))
      .map(s => Option(s.summary().get("removed-files-size")).map(_.toLong).getOrElse(0L))
      .sum
}
