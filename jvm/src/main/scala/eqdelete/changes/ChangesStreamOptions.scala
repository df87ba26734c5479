package eqdelete.changes

import scala.util.Try

/**
 * What a stream of a table's changes (`format("eqdelete-changes")`) asks for, parsed once from its
 * read options, named as Spark's own streaming sources name theirs.
 *
 * @param table             the table, `load`'s argument
 * @param start             where the stream starts when its checkpoint has no offset yet
 * @param maxFilesPerTrigger at most this many data files read a micro-batch (at least one)
 * @param maxSnapshotsPerTrigger at most this many snapshots that change rows a micro-batch
 * @param changes           `compute_updates` and `identifier_columns`, as in a batch read
 */
final case class ChangesStreamOptions(
    table: String,
    start: StreamStart,
    maxFilesPerTrigger: Option[Int],
    maxSnapshotsPerTrigger: Option[Int],
    changes: ChangesOptions)

/** Where a stream of changes starts. */
sealed trait StreamStart
object StreamStart {
  /** From the table's first snapshot (every row an insert), or its oldest readable one's rows when history expired. */
  case object Earliest extends StreamStart
  /** After the current snapshot: only what is committed from now on. */
  case object Latest extends StreamStart
  /** From this snapshot's changes on (inclusive). */
  final case class AtSnapshot(id: Long) extends StreamStart
  /** From the first snapshot committed at or after this time (milliseconds) on. */
  final case class AtTimestamp(millis: Long) extends StreamStart
}

object ChangesStreamOptions {
  val Path = "path"
  val StartingOffsets = "startingoffsets"
  val StartingSnapshotId = "startingsnapshotid"
  val StartingTimestamp = "startingtimestamp"
  val MaxFilesPerTrigger = "maxfilespertrigger"
  val MaxSnapshotsPerTrigger = "maxsnapshotspertrigger"
  /** The options as users write them (Spark's options are case-insensitive). */
  val Names: Seq[String] = Seq("startingOffsets", "startingSnapshotId", "startingTimestamp", "maxFilesPerTrigger",
    "maxSnapshotsPerTrigger", ChangesOptions.ComputeUpdates, ChangesOptions.IdentifierColumns)

  def parse(parameters: Map[String, String]): ChangesStreamOptions = {
    val lower = parameters.map { case (k, v) => k.toLowerCase(java.util.Locale.ROOT) -> v }
    val known = Names.map(_.toLowerCase(java.util.Locale.ROOT)) :+ Path
    lower.keys.filterNot(known.contains).toSeq.sorted.headOption.foreach { key =>
      throw new IllegalArgumentException(s"eqdelete-changes: unknown option '$key'; the options are ${Names.mkString(", ")}")
    }
    val table = lower.get(Path).map(_.trim).filter(_.nonEmpty).getOrElse(throw new IllegalArgumentException(
      "eqdelete-changes: name the table: spark.readStream.format(\"eqdelete-changes\").load(\"catalog.db.table\")"))
    val starts = Seq(StartingOffsets, StartingSnapshotId, StartingTimestamp).filter(lower.contains)
    if (starts.size > 1) {
      throw new IllegalArgumentException(s"eqdelete-changes: give one of startingOffsets, startingSnapshotId and " +
        s"startingTimestamp, not ${starts.size}")
    }
    val start = lower.get(StartingOffsets).map(_.trim.toLowerCase(java.util.Locale.ROOT) match {
      case "earliest" => StreamStart.Earliest
      case "latest" => StreamStart.Latest
      case other => throw new IllegalArgumentException(s"eqdelete-changes: startingOffsets is earliest or latest, not '$other'")
    }).orElse(lower.get(StartingSnapshotId).map(v => StreamStart.AtSnapshot(Try(v.trim.toLong).getOrElse(
      throw new IllegalArgumentException(s"eqdelete-changes: startingSnapshotId must be a snapshot id, not '$v'")))))
      .orElse(lower.get(StartingTimestamp).map(v => StreamStart.AtTimestamp(millis(v))))
      .getOrElse(StreamStart.Earliest)
    def positive(key: String, name: String): Option[Int] = lower.get(key).map { v =>
      Try(v.trim.toInt).toOption.filter(_ > 0).getOrElse(
        throw new IllegalArgumentException(s"eqdelete-changes: $name must be a positive whole number, not '$v'"))
    }
    val changes = ChangesOptions.parse(lower.filter { case (k, _) =>
      k == ChangesOptions.ComputeUpdates || k == ChangesOptions.IdentifierColumns })
    ChangesStreamOptions(table, start, positive(MaxFilesPerTrigger, "maxFilesPerTrigger"),
      positive(MaxSnapshotsPerTrigger, "maxSnapshotsPerTrigger"), changes)
  }

  /** Milliseconds since the epoch, or a timestamp as Spark SQL writes one ('2026-11-29 10:00:00', in UTC when no zone is given). */
  private def millis(value: String): Long = {
    val v = value.trim
    Try(v.toLong).orElse(Try(java.time.Instant.parse(v).toEpochMilli))
      .orElse(Try(java.time.OffsetDateTime.parse(v.replace(' ', 'T')).toInstant.toEpochMilli))
      .orElse(Try(java.time.LocalDateTime.parse(v.replace(' ', 'T')).toInstant(java.time.ZoneOffset.UTC).toEpochMilli))
      .getOrElse(throw new IllegalArgumentException(s"eqdelete-changes: startingTimestamp must be milliseconds since " +
        s"the epoch or a timestamp such as 2026-11-29T10:00:00Z, not '$value'"))
  }
}
