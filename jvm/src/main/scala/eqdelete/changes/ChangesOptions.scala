package eqdelete.changes

import scala.util.Try

/**
 * What a read of a table's changes asks for, parsed once from the options Iceberg's changelog view
 * takes (`start-snapshot-id`, `end-snapshot-id`, `start-timestamp`, `end-timestamp`, in
 * milliseconds) and its procedure's arguments (`compute_updates`, `identifier_columns`, comma
 * separated, and `net_changes`), by the same names.
 */
final case class ChangesOptions(
    startSnapshotId: Option[Long] = None,
    endSnapshotId: Option[Long] = None,
    startTimestampMillis: Option[Long] = None,
    endTimestampMillis: Option[Long] = None,
    computeUpdates: Boolean = false,
    identifierColumns: Option[Seq[String]] = None,
    netChanges: Boolean = false) {

  if (startSnapshotId.isDefined && startTimestampMillis.isDefined) {
    throw new IllegalArgumentException("eqdelete: give start-snapshot-id or start-timestamp, not both")
  }
  if (endSnapshotId.isDefined && endTimestampMillis.isDefined) {
    throw new IllegalArgumentException("eqdelete: give end-snapshot-id or end-timestamp, not both")
  }
  if (computeUpdates && netChanges) {
    // As Iceberg's view: a net change over the range has no one snapshot's before and after images.
    throw new IllegalArgumentException("eqdelete: compute_updates and net_changes cannot both be set")
  }
}

object ChangesOptions {
  val StartSnapshotId = "start-snapshot-id"
  val EndSnapshotId = "end-snapshot-id"
  val StartTimestamp = "start-timestamp"
  val EndTimestamp = "end-timestamp"
  val ComputeUpdates = "compute_updates"
  val IdentifierColumns = "identifier_columns"
  val NetChanges = "net_changes"
  val Known: Seq[String] = Seq(StartSnapshotId, EndSnapshotId, StartTimestamp, EndTimestamp, ComputeUpdates,
    IdentifierColumns, NetChanges)

  def parse(options: Map[String, String]): ChangesOptions = {
    val lower = options.map { case (k, v) => k.trim.toLowerCase(java.util.Locale.ROOT) -> v }
    lower.keys.filterNot(Known.contains).toSeq.sorted.headOption.foreach { key =>
      throw new IllegalArgumentException(s"eqdelete: unknown changes option '$key'; the options are ${Known.mkString(", ")}")
    }
    def long(key: String): Option[Long] = lower.get(key).filter(_ != null).map { v =>
      Try(v.trim.toLong).getOrElse(throw new IllegalArgumentException(s"eqdelete: $key must be a whole number, not '$v'"))
    }
    def bool(key: String): Boolean = lower.get(key).filter(_ != null).exists { v =>
      v.trim.toLowerCase(java.util.Locale.ROOT) match {
        case "true" => true
        case "false" => false
        case _ => throw new IllegalArgumentException(s"eqdelete: $key must be true or false, not '$v'")
      }
    }
    ChangesOptions(long(StartSnapshotId), long(EndSnapshotId), long(StartTimestamp), long(EndTimestamp),
      bool(ComputeUpdates), lower.get(IdentifierColumns).filter(_ != null).map(_.split(",").map(_.trim).filter(_.nonEmpty).toSeq),
      bool(NetChanges))
  }
}
