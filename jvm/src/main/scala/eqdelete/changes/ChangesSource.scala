package eqdelete.changes

import scala.collection.mutable
import scala.jdk.CollectionConverters._

import org.apache.iceberg.{Schema, Snapshot, Table}
import org.apache.spark.sql.{DataFrame, SparkSession}
import org.apache.spark.sql.connector.read.streaming.{ReadAllAvailable, ReadLimit, SupportsTriggerAvailableNow,
  Offset => OffsetV2}
import org.apache.spark.sql.eqdelete.compat.{IcebergSparkTables, SparkShim}
import org.apache.spark.sql.execution.streaming.{Offset, Source}
import org.apache.spark.sql.types.StructType

/**
 * The changes of an Iceberg table as a micro-batch stream: the rows ChangesPlan gives, snapshot
 * by snapshot along the current snapshot's ancestors, each micro-batch a bounded slice of them.
 *
 * A snapshot's work is its units: the files whose rows it may delete (read first, so a split
 * snapshot's deletes reach a sink before its inserts), then the files it added, each in name
 * order. An offset (ChangesOffset) is a snapshot and how many of its units are read; which units a
 * snapshot has is decided from metadata, so a batch replayed after a restart reads the same rows.
 * Snapshots that change no row have no units and cost a batch nothing.
 *
 * Carry-over rows (deleted and inserted identically by a snapshot) are dropped as in a batch read
 * when a snapshot is read in one batch; when `maxFilesPerTrigger` splits one, they are dropped
 * within each part, and may show as a DELETE then an INSERT of the same row.
 */
final class ChangesSource(session: SparkSession, options: ChangesStreamOptions, target: Schema,
    log: ChangesStreamLog)
    extends Source with SupportsTriggerAvailableNow {

  // An instance of its own, loaded again (`fresh`) before every use of new metadata, past the
  // catalog's cache: the batches read the snapshots through it (ChangesPlan.liveRows), so this
  // source never reads or replaces the cache the session's own queries and commits go through.
  @volatile private var table: Table = IcebergSparkTables.uncached(session, options.table)
  private def fresh(): Unit = table = IcebergSparkTables.uncached(session, options.table)
  private val identifiers: Option[Seq[String]] =
    if (options.changes.computeUpdates) Some(ChangesPlan.identifierColumns(table, target, options.changes)) else None
  ChangesPlan.requireComparable(table, target)

  /** The snapshot AvailableNow reads up to, fixed when the trigger starts. */
  private var availableNowEnd: Option[Option[Long]] = None
  // Filled by latestOffset on the stream's thread, read by a batch's job where its action runs.
  private val unitsCache = scala.collection.concurrent.TrieMap.empty[(Long, Boolean), IndexedSeq[StreamUnit]]
  // A snapshot's files, for what a batch's read makes of them (SnapshotChangeFiles.byKeys, everyParentFile).
  private val filesCache = scala.collection.concurrent.TrieMap.empty[Long, SnapshotChangeFiles]
  private lazy val startPosition: StreamPosition = log.startOrKeep(initial())
  // The snapshots committed before this query started, which it reads in `target`, the schema of
  // its columns, as a batch read ending there would. A snapshot committed since in a schema that
  // changes those columns stops the stream there (see latestOffset).
  private val startedAt: Option[Snapshot] = Option(table.currentSnapshot())
  private lazy val beforeStart: Set[Long] = startedAt.fold(Set.empty[Long])(s => ChangeRange.ancestors(table, s).map(_.snapshotId()).toSet)

  /** A step's units: those kept when it was split, else from metadata. */
  private def unitsOf(step: ChangesSource.Step): IndexedSeq[StreamUnit] =
    unitsCache.getOrElseUpdate((step.snapshot.snapshotId(), step.full),
      log.splitUnits(step.snapshot.snapshotId(), step.full).getOrElse(unitsFor(step)))

  override val schema: StructType = ChangesPlan.schema(target)

  override def getOffset: Option[Offset] =
    throw new UnsupportedOperationException("eqdelete-changes offers latestOffset(start, limit)")

  override def getDefaultReadLimit: ReadLimit =
    if (options.maxFilesPerTrigger.isEmpty && options.maxSnapshotsPerTrigger.isEmpty) ReadLimit.allAvailable()
    else ChangesSource.PerTrigger(options.maxFilesPerTrigger, options.maxSnapshotsPerTrigger)

  override def prepareForTriggerAvailableNow(): Unit = {
    startPosition  // where it starts first, then where it ends: a commit between them is read, not refused
    fresh()
    availableNowEnd = Some(Option(table.currentSnapshot()).map(_.snapshotId()))
  }

  override def latestOffset(startOffset: OffsetV2, limit: ReadLimit): OffsetV2 = {
    fresh()
    val position = Option(startOffset).map(o => ChangesOffset.fromJson(o.json()).position).getOrElse(startPosition)
    val end = availableNowEnd.getOrElse(Option(table.currentSnapshot()).map(_.snapshotId()))
    val (maxFiles, maxSnapshots) = limit match {
      case _: ReadAllAvailable => (Int.MaxValue, Int.MaxValue)
      case _ => (options.maxFilesPerTrigger.getOrElse(Int.MaxValue), options.maxSnapshotsPerTrigger.getOrElse(Int.MaxValue))
    }
    var reached = position
    var files = 0
    var snapshots = 0
    val pending = end.map(steps(position, _)).getOrElse(Nil).iterator
    var full = false
    while (pending.hasNext && !full) {
      val step = pending.next()
      val units = unitsOf(step)
      val left = math.max(0, units.size - step.first)
      val changed = if (left > 0) schemaChanges(step.snapshot) else Nil
      if (changed.nonEmpty) {
        // The batches so far end before it; the first to reach it fails, naming the change.
        if (reached == position) throw schemaChanged(step.snapshot, changed)
        full = true
      } else if (left > 0 && snapshots >= maxSnapshots) full = true
      else {
        val take = math.min(left, maxFiles - files)
        if (take < left) {
          // A part of the snapshot (a first batch takes at least one file, as maxFiles >= 1), its
          // units kept before the offset that counts them is.
          if (take > 0) {
            log.keepSplitUnits(step.snapshot.snapshotId(), step.full, units)
            reached = StreamPosition(step.snapshot.snapshotId(), step.ordinal, step.full, step.first + take, done = false)
          }
          full = true
        } else {
          reached = StreamPosition(step.snapshot.snapshotId(), step.ordinal, step.full, units.size, done = true)
          files += left
          if (left > 0) snapshots += 1
        }
      }
    }
    if (reached == position) startOffset else ChangesOffset(reached)
  }

  override def getBatch(start: Option[Offset], end: Offset): DataFrame = {
    val to = ChangesOffset.fromJson(end.json()).position
    val from = start.map(o => ChangesOffset.fromJson(o.json()).position).getOrElse(startPosition)
    // Deferred: Spark also asks for the last committed batch on restart, and never reads it.
    SparkShim.deferredStreamingDataFrame(session, schema, () => changesBetween(from, to))
  }

  /** The changes after `from` up to `to`: each snapshot's slice of units, in the stream's columns. */
  private def changesBetween(from: StreamPosition, to: StreamPosition): DataFrame = {
    fresh()
    // The whole snapshots' rows (a start past expired history), and the other steps' changes as one plan.
    val slices = steps(from, to.snapshotId).flatMap { step =>
      val units = unitsOf(step)
      val last = if (step.snapshot.snapshotId() == to.snapshotId && !to.done) to.consumed else units.size
      Some((step, units.slice(step.first, last), step.first == 0 && last == units.size)).filter(_._2.nonEmpty)
    }
    val (full, partial) = slices.partition(_._1.full)
    val whole = full.map { case (step, slice, _) =>
      ChangesPlan.liveInserts(session, table, target, step.snapshot, step.ordinal, slice.map(_.file).toSet)
    }
    val work = partial.map { case (step, slice, allOfIt) =>
      val (deleted, added) = slice.partition(_.deletes)
      val files = if (deleted.isEmpty) None else Some(changeFilesOf(step))
      SnapshotWork(step.snapshot, step.ordinal, deleted.map(_.file).toSet, added.map(_.file).toSet, files.flatMap(_.byKeys),
        allOfIt, files.exists(_.everyParentFile))
    }
    val changed = if (work.isEmpty) Nil else Seq(ChangesPlan.changesOf(session, table, target, work, Some(log.stateRoot)))
    val changes = (whole ++ changed).reduceOption(_ unionByName _).getOrElse(ChangesPlan.empty(session, target))
    identifiers.map(ChangesPlan.updates(changes, _)).getOrElse(changes)
  }

  override def deserializeOffset(json: String): OffsetV2 = ChangesOffset.fromJson(json)

  /**
   * Forgets what no later batch reads: the units and files of the snapshots `end` has read whole
   * (its snapshot once done, and the ancestors of it). Spark commits a batch's end after the next
   * batch's offset is written, so the snapshot that offset split stays kept until a batch that
   * finishes it is committed.
   */
  override def commit(end: Offset): Unit = {
    val at = ChangesOffset.fromJson(end.json()).position
    val kept = (unitsCache.keys.map(_._1) ++ filesCache.keys ++ log.splitSnapshots()).toSet
    val done = readWhole(at, kept)
    unitsCache.keys.filter(k => done(k._1)).foreach(unitsCache.remove)
    filesCache.keys.filter(done).foreach(filesCache.remove)
    log.forgetSplitUnits(kept.filter(done))
  }

  /** Which of `ids` a stream at `at` has read whole: `at`'s snapshot when done, its ancestors, and snapshots expired. */
  private def readWhole(at: StreamPosition, ids: Set[Long]): Set[Long] = {
    val expired = ids.filter(table.snapshot(_) == null)
    val ancestors = Option(table.snapshot(at.snapshotId)).toSeq.flatMap { s =>
      val wanted = ids -- expired
      ChangeRange.ancestors(table, s).drop(1).map(_.snapshotId()).filter(wanted).take(wanted.size).toSeq
    }
    expired ++ ancestors ++ Some(at.snapshotId).filter(id => at.done && ids(id))
  }

  /**
   * How `snapshot`'s schema changes the stream's columns (ByFieldId.changes), when it was
   * committed after the stream started: a stream's columns are fixed when it starts.
   */
  private def schemaChanges(snapshot: Snapshot): Seq[String] =
    if (beforeStart(snapshot.snapshotId()) || startedAt.exists(_.snapshotId() == snapshot.snapshotId())) Nil
    else ByFieldId.changes(target, ChangesPlan.schemaOf(table, snapshot))

  private def schemaChanged(snapshot: Snapshot, changes: Seq[String]): IllegalStateException =
    new IllegalStateException(s"eqdelete-changes: snapshot ${snapshot.snapshotId()} of ${table.name()} was written in a " +
      s"schema that changes the stream's columns (${changes.mkString("; ")}), which are fixed when it starts: every " +
      "change before it is read and committed; restart the query from its checkpoint to read on, in the new schema")

  override def stop(): Unit = ()

  override def toString: String = s"eqdelete-changes[${table.name()}]"

  /**
   * The snapshots a stream at `position` reads next, up to `end` (a snapshot id), oldest first:
   * the rest of the one it is in, then the descendants of it that are ancestors of `end`. Fails in
   * one line when one of them has expired or the stream's snapshot is no longer an ancestor of `end`.
   */
  private def steps(position: StreamPosition, end: Long): Seq[ChangesSource.Step] = {
    val after = mutable.ArrayBuffer.empty[Snapshot]
    if (end != position.snapshotId) {
      var at = snapshotOrFail(end, position)
      var reached = false
      while (!reached) {
        after += at
        Option(at.parentId()).map(_.longValue()) match {
          case Some(id) if id == position.snapshotId => reached = true
          case Some(id) => at = snapshotOrFail(id, position)
          case None if position.snapshotId == StreamPosition.NoSnapshot => reached = true
          case None => throw new IllegalStateException(s"eqdelete-changes: snapshot ${position.snapshotId}, where the " +
            s"stream of ${table.name()} is, is not an ancestor of its snapshot $end (was the table rolled back?): " +
            "start a new stream from a new checkpoint")
        }
      }
    }
    val rest = if (position.done) Nil else Seq(ChangesSource.Step(snapshotOrFail(position.snapshotId, position),
      position.ordinal, position.full, position.consumed))
    rest ++ after.reverse.zipWithIndex.map { case (s, i) => ChangesSource.Step(s, position.ordinal + 1 + i, full = false, 0) }
  }

  private def snapshotOrFail(id: Long, position: StreamPosition): Snapshot =
    Option(table.snapshot(id)).getOrElse(throw expired(id, position))

  private def expired(id: Long, position: StreamPosition): IllegalStateException = {
    val oldest = table.snapshots().asScala.toSeq.sortBy(_.timestampMillis()).headOption
      .map(s => s"; the oldest snapshot that can still be read is ${s.snapshotId()}").getOrElse("")
    new IllegalStateException(s"eqdelete-changes: the stream of ${table.name()} is at snapshot " +
      s"${position.snapshotId} and its next snapshots have expired (snapshot $id is gone)$oldest: start a new stream " +
      "from a new checkpoint, which reads the oldest snapshot's rows and then its changes")
  }

  /** A step's units, from metadata: the touched files then the added ones, or all the data files of a full read. */
  private def unitsFor(step: ChangesSource.Step): IndexedSeq[StreamUnit] = {
    if (step.full) {
      scala.util.Using.resource(table.newScan().useSnapshot(step.snapshot.snapshotId()).planFiles())(
        _.asScala.map(_.file().location()).toVector.distinct.sorted.map(StreamUnit(_, deletes = false)))
    } else {
      val files = changeFilesOf(step)
      if (files.unchanged.isDefined) Vector.empty
      else {
        files.touched.toVector.sorted.map(StreamUnit(_, deletes = true)) ++
          files.added.toVector.sorted.map(StreamUnit(_, deletes = false))
      }
    }
  }

  /**
   * What a step's snapshot changes, from metadata (kept until committed). Its deletes are found
   * among its parent's rows: with the parent gone, only a snapshot that deletes nothing can
   * still be read, and one that does fails naming the snapshot gone.
   */
  private def changeFilesOf(step: ChangesSource.Step): SnapshotChangeFiles =
    filesCache.getOrElseUpdate(step.snapshot.snapshotId(), {
      val parentGone = Option(step.snapshot.parentId()).map(_.longValue()).filter(table.snapshot(_) == null)
      def gone(id: Long) = expired(id, StreamPosition(id, step.ordinal - 1, full = false, 0, done = true))
      val files = try SnapshotChangeFiles.of(table, step.snapshot) catch {
        case scala.util.control.NonFatal(_) if parentGone.isDefined => throw gone(parentGone.get)
      }
      parentGone.filter(_ => files.touched.nonEmpty).foreach(id => throw gone(id))
      files
    })

  /** Where a stream without a checkpointed offset starts (StreamStart). */
  private def initial(): StreamPosition = {
    fresh()
    val current = Option(table.currentSnapshot())
    def ancestors: Iterator[Snapshot] = ChangeRange.ancestors(table, current.orNull)
    def before(s: Snapshot) = StreamPosition.before(Option(s.parentId()).map(_.longValue()))
    val latest = StreamPosition.before(current.map(_.snapshotId()))
    options.start match {
      case StreamStart.Latest => latest
      case StreamStart.AtSnapshot(id) => ancestors.find(_.snapshotId() == id).map(before).getOrElse(
        throw new IllegalArgumentException(s"eqdelete-changes: snapshot $id is not the current snapshot of " +
          s"${table.name()} or one of its ancestors"))
      case StreamStart.AtTimestamp(millis) =>
        val since = ancestors.takeWhile(_.timestampMillis() >= millis).toSeq
        since.lastOption.filter(s => s.parentId() != null && table.snapshot(s.parentId().longValue()) == null).foreach { s =>
          // History before it expired: snapshots committed after the time may be among those gone.
          throw new IllegalArgumentException(s"eqdelete-changes: startingTimestamp $millis is before snapshot " +
            s"${s.snapshotId()} (committed at ${java.time.Instant.ofEpochMilli(s.timestampMillis())}), the oldest of " +
            s"${table.name()} that can still be read, and the changes before it have expired: start later, or with " +
            "startingOffsets earliest to read that snapshot's rows whole")
        }
        since.lastOption.map(before).getOrElse(latest)
      case StreamStart.Earliest =>
        ancestors.toSeq.lastOption match {
          case None => StreamPosition.before(None)
          case Some(first) if first.parentId() == null => StreamPosition.before(None)
          // Its parent expired: its rows, whole, then the changes after it.
          case Some(first) => StreamPosition(first.snapshotId(), 0, full = true, 0, done = false)
        }
    }
  }
}

object ChangesSource {
  /** The work of one snapshot from its unit `first` on; `full` for a whole snapshot's rows. */
  private final case class Step(snapshot: Snapshot, ordinal: Int, full: Boolean, first: Int)

  /** At most this many files and snapshots that change rows per micro-batch. */
  final case class PerTrigger(maxFiles: Option[Int], maxSnapshots: Option[Int]) extends ReadLimit
}
