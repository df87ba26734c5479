package eqdelete.changes

import scala.collection.mutable
import scala.jdk.CollectionConverters._

import org.apache.iceberg.{Snapshot, Table}

/**
 * The snapshots whose changes a read gives, oldest first: those after `start` (exclusive) up to
 * `end` (inclusive) on `end`'s line of ancestors, as Iceberg's changelog view takes its range.
 */
final case class ChangeRange(table: Table, snapshots: Seq[Snapshot])

object ChangeRange {

  /**
   * The range `options` give: by snapshot ids, or by commit times (the start after the newest
   * ancestor committed at or before `start-timestamp`, from the first when none was; the end at
   * the newest committed at or before `end-timestamp`, an empty range when none was).
   */
  def of(table: Table, options: ChangesOptions): ChangeRange = {
    val current = Option(table.currentSnapshot())
    val end = options.endSnapshotId.map(Some(_)).getOrElse(options.endTimestampMillis.map { millis =>
      current.flatMap(asOf(table, _, millis))
    }.getOrElse(current.map(_.snapshotId())))
    if (options.endTimestampMillis.isDefined && end.isEmpty) return ChangeRange(table, Nil)
    val start = options.startSnapshotId.orElse(options.startTimestampMillis.flatMap { millis =>
      end.map(table.snapshot).filter(_ != null).flatMap(asOf(table, _, millis))
    })
    of(table, start, end)
  }

  /** The newest of `from` and its ancestors committed at or before `millis`. */
  private def asOf(table: Table, from: Snapshot, millis: Long): Option[Long] =
    ancestors(table, from).find(_.timestampMillis() <= millis).map(_.snapshotId())

  /** `from` (null: none) and its ancestors, newest first, up to the first whose parent has expired. */
  private[eqdelete] def ancestors(table: Table, from: Snapshot): Iterator[Snapshot] =
    Iterator.iterate(from)(s => Option(s.parentId()).map(id => table.snapshot(id.longValue())).orNull).takeWhile(_ != null)

  /**
   * `start`: None from the table's first snapshot on `end`'s lineage (its rows all inserts).
   * `end`: None for the current snapshot. Fails in one line when `start` is not an ancestor of
   * `end`, or when a snapshot between them has expired, naming the oldest one still readable.
   */
  def of(table: Table, start: Option[Long], end: Option[Long]): ChangeRange = {
    val name = table.name()
    val newest = end.map(id => Option(table.snapshot(id)).getOrElse(throw new IllegalArgumentException(
      s"eqdelete: cannot read the changes of $name up to snapshot $id: the table has no such snapshot${oldest(table)}")))
    val last = newest.getOrElse(table.currentSnapshot())
    if (last == null) return ChangeRange(table, Nil)  // no snapshot yet: no changes
    val walked = mutable.ArrayBuffer.empty[Snapshot]
    var at: Snapshot = last
    // Back from `end` to `start` (or the root): each snapshot's changes need its parent's rows.
    while (at != null && !start.contains(at.snapshotId())) {
      walked += at
      val parent = Option(at.parentId()).map(_.longValue())
      at = parent.map(table.snapshot).orNull
      parent.filter(_ => at == null).foreach { gone =>
        val after = start.map(s => s" after snapshot $s").getOrElse("")
        throw new IllegalArgumentException(s"eqdelete: cannot read the changes of $name$after: snapshot $gone, " +
          s"the parent of ${walked.last.snapshotId()}, has expired${oldest(table)}")
      }
    }
    start.filter(_ => at == null).foreach { id =>
      throw new IllegalArgumentException(s"eqdelete: cannot read the changes of $name after snapshot $id: it is not " +
        s"an ancestor of snapshot ${last.snapshotId()}${oldest(table)}")
    }
    ChangeRange(table, walked.reverse.toSeq)
  }

  /** "; the oldest snapshot that can still be read is N (committed at T)", or "" for a table without one. */
  private def oldest(table: Table): String = {
    val snapshots = table.snapshots().asScala
    if (snapshots.isEmpty) "" else {
      val first = snapshots.minBy(_.timestampMillis())
      s"; the oldest snapshot that can still be read is ${first.snapshotId()} (committed at " +
        s"${java.time.Instant.ofEpochMilli(first.timestampMillis())})"
    }
  }
}
