package eqdelete.liveindex

import java.util.concurrent.ConcurrentHashMap

import scala.collection.mutable
import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import eqdelete.commit.Failures
import eqdelete.cost.{LiveIndexSetting, MaintainRoundPlan}
import eqdelete.planning.ScanDeletes
import eqdelete.resolve.{DeletedPositions, ResolveEqualityDeletes, ResolveWork}

import org.apache.spark.internal.Logging
import org.apache.spark.rdd.RDD
import org.apache.spark.sql.{DataFrame, SparkSession}
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.eqdelete.compat.{IcebergSparkTables, SparkShim}
import org.apache.spark.sql.types.{LongType, StringType, StructField, StructType}
import org.apache.spark.storage.StorageLevel
import org.apache.spark.unsafe.types.UTF8String

/**
 * The kept indexes of the live rows ([[KeptLiveIndex]]) of this driver, one per table and
 * equality set, and a resolve that finds its positions through them. An index that a failure
 * may have left half brought forward, or that missed its round's commit, is dropped, never
 * trusted: the next round builds it again.
 */
object KeptLiveIndexes extends Logging {
  private val kept = mutable.HashMap.empty[(String, Seq[Int]), KeptLiveIndex]
  private val tables = new ConcurrentHashMap[String, Object]()

  private val Positions = StructType(Seq(StructField("_file", StringType, nullable = false), StructField("_pos", LongType, nullable = false)))

  /**
   * A table's kept indexes after a round: their entries and bytes, and what the round did
   * otherwise than bring them forward (built them, and why; read the data files instead, and
   * why), else None.
   */
  final case class State(entries: Long, bytes: Long, note: Option[String], checkpointBytes: Long = 0, storedBytes: Long = 0)

  /** Runs `body` with `tableName`'s kept indexes to itself: two rounds of one table never bring them forward at once. */
  def exclusively[A](tableName: String)(body: => A): A = tables.computeIfAbsent(tableName, _ => new Object).synchronized(body)

  /** How each table's current round finds its rows (its last attempt's choice). */
  private val plans = new ConcurrentHashMap[String, MaintainRoundPlan]()

  /**
   * The first half of a resolve of `tableName` as a long-running `maintain`'s round makes it:
   * its positions found through its kept indexes (each brought to the round's snapshot first,
   * `stores` stores when built), or by reading the data files, as `setting` and the round's
   * metadata choose ([[MaintainRoundPlan]]); its commit is [[ResolveEqualityDeletes]]'s, after
   * which the positions it resolved leave the indexes. Call it within [[exclusively]].
   */
  def prepare(session: SparkSession, tableName: String, stores: Int, setting: LiveIndexSetting): ResolveEqualityDeletes.Prepared =
    prepared(session, tableName, stores, alsoToday = false, MaintainRoundPlan.choose(setting, _))._1

  /** The positions a resolve found (`file#pos`, sorted): today's plan's (when asked for), and the round's once it commits. */
  private final class Seen { var today = Seq.empty[String]; var found = Seq.empty[String] }

  /** What the round's data files, and its delete rows, are: the choice's facts. */
  private def facts(deletes: ScanDeletes, indexHeld: Boolean): MaintainRoundPlan.Facts = {
    val files = DeletedPositions.dataFiles(deletes)
    MaintainRoundPlan.Facts(files.size, files.map(_.recordCount()).sum, deletes.deleteSets.map(_.records).sum, indexHeld)
  }

  private def prepared(session: SparkSession, tableName: String, stores: Int, alsoToday: Boolean,
      choose: MaintainRoundPlan.Facts => MaintainRoundPlan): (ResolveEqualityDeletes.Prepared, Seen) = {
    val seen = new Seen
    // Through the indexes: per index, its finds. Reading the data files: the rows found.
    var found = Seq.empty[(KeptLiveIndex, RDD[IndexedDeletedPositions.Found])]
    var read: Option[DataFrame] = None
    def release(): Unit = found.foreach(_._2.unpersist())
    def settled(result: Option[ResolveEqualityDeletes.Result]): Unit =
      try {
        if (alsoToday) seen.found = (found.flatMap(_._2.map(f => s"${f.path}#${f.position}").collect()) ++
          read.toSeq.flatMap(_.collect().map(r => s"${r.getString(0)}#${r.getLong(1)}"))).distinct.sorted
        result.flatMap(_.snapshotId).foreach { s =>
          // Where each set's rows were resolved, for the other sets' indexes (one set: none to tell).
          val files = if (found.size < 2) found.map(_ => Set.empty[String])
            else found.map { case (_, rows) => rows.map(_.path).distinct().collect().toSet }
          found.zipWithIndex.foreach { case ((index, rows), i) =>
            index.committed(s, rows.map(_.entry), files.indices.filter(_ != i).flatMap(files).toSet)
          }
        }
      } catch {
        // The commit stands; the index may not have taken all of it, so it is not trusted again.
        case NonFatal(e) =>
          logWarning(s"eqdelete: the kept index of $tableName missed its round's commit (${e.getMessage}); built again next round")
          forget(session, tableName)
      } finally release()
    try {
      val prepared = ResolveEqualityDeletes.prepareWith(session, tableName)({ (work, deletes) =>
        if (alsoToday) seen.today = DeletedPositions.of(session, work, deletes).collect()
          .map(r => s"${r.getString(0)}#${r.getLong(1)}").distinct.sorted.toSeq
        // The round has the table to itself (exclusively): no other creates or drops its indexes meanwhile.
        var passedOver = Map.empty[Seq[Int], Seq[String]]
        val held = deletes.deleteSets.map(set => set -> synchronized(kept.get((tableName, set.equalityIds))).orElse(
          restored(session, work, set.equalityIds) match {
            case Right(index) =>
              synchronized(kept((tableName, set.equalityIds)) = index)
              Some(index)
            case Left(why) => passedOver += set.equalityIds -> why; None
          }))
        val current = held.forall(_._2.exists(_.current(work, stores)))
        val plan = choose(facts(deletes, current))
        plans.put(tableName, plan)
        plan match {
          case _: MaintainRoundPlan.ThroughIndex =>
            found = held.map { case (set, heldIndex) =>
              val index = heldIndex.getOrElse {
                val made = created(session, work, set.equalityIds, stores)
                made.passedOver = passedOver.getOrElse(set.equalityIds, Nil)
                synchronized(kept((tableName, set.equalityIds)) = made)
                made
              }
              index -> index.positions(session, work, deletes, set, stores).persist(StorageLevel.MEMORY_AND_DISK)
            }
            // One set's finds are each found once at their store; several sets' may find one row each.
            val once = found.map(_._2.mapPartitions(rows => LiveKeyIndex.onceEach(rows)(_.entry).map(f => (f.path, f.position))))
            val positions = if (once.size == 1) once.head else session.sparkContext.union(once).distinct()
            ResolveEqualityDeletes.FoundPositions(SparkShim.internalDataFrame(session,
              positions.map { case (f, p) => InternalRow(UTF8String.fromString(f), p) }, Positions),
              found.map(_._1.lastFilesRead).sum)
          case _: MaintainRoundPlan.ReadingDataFiles =>
            // Rounds like this one cost less without the index: it is dropped, not kept up.
            held.foreach { case (set, index) => index.foreach(drop(session, tableName, set.equalityIds, _)) }
            read = Some(DeletedPositions.of(session, work, deletes))
            ResolveEqualityDeletes.FoundPositions(read.get, DeletedPositions.dataFilesRead(deletes))
        }
      }, settled)
      (prepared, seen)
    } catch {
      // Whatever stopped it (an interrupt too), an index it may have half brought forward is dropped.
      case e: Throwable =>
        release()
        forget(session, tableName)
        throw e
    }
  }

  /**
   * The newest index of `work`'s table and equality set saved (before a restart, say) that loads
   * and verifies; Left: why each saved version was passed over (a failure to list them is one).
   */
  private def restored(session: SparkSession, work: ResolveWork, equalityIds: Seq[Int]): Either[Seq[String], KeptLiveIndex] = {
    val restored = try KeptLiveIndex.restore(session, KeptLiveIndex.files(session, work.table, equalityIds)) catch {
      case NonFatal(e) => Left(Seq(s"the saved versions could not be listed (${Failures.describe(e)})"))
    }
    val passed = restored.fold(identity, _.passedOver)
    if (passed.nonEmpty) logWarning(s"eqdelete: kept index of ${work.table.name()}: ${restored.fold(_ => "built anew", _ => "restored")}; " +
      s"saved versions passed over: ${passed.mkString("; ")}")
    restored
  }

  private def created(session: SparkSession, work: ResolveWork, equalityIds: Seq[Int], stores: Int): KeptLiveIndex =
    KeptLiveIndex.create(session, KeptLiveIndex.files(session, work.table, equalityIds), stores)

  /** A round of `tableName` begins (before its first attempt): its indexes' news of the last round is cleared. */
  def beginRound(tableName: String): Unit = {
    plans.remove(tableName)
    indexesOf(tableName).foreach(_.beginRound())
  }

  private def indexesOf(tableName: String): Vector[KeptLiveIndex] =
    synchronized(kept.collect { case ((t, _), index) if t == tableName => index }.toVector)

  /**
   * For the differential test: a round through the kept indexes (built when not held), or
   * (`reading`) by reading the data files, the held indexes dropped; (today's positions, the
   * round's, rows resolved).
   */
  def roundBothWays(session: SparkSession, tableName: String, reading: Boolean): (java.util.List[String], java.util.List[String], Long) =
    exclusively(tableName) {
      beginRound(tableName)
      val (prepared, seen) = this.prepared(session, tableName, stores = 3, alsoToday = true, _ =>
        if (reading) MaintainRoundPlan.ReadingDataFiles("the test reads") else MaintainRoundPlan.ThroughIndex("the test looks up"))
      val result = prepared.commit()
      (seen.today.asJava, seen.found.asJava, result.rowsResolved)
    }

  /**
   * What a round of `tableName` would choose now under auto, from metadata only, with this
   * driver's indexes as they are held: `[index | reading | nothing, why]`. For reports (the
   * maintain scale benchmark's "auto picks").
   */
  def autoChoice(session: SparkSession, tableName: String): java.util.List[String] = exclusively(tableName) {
    val work = ResolveEqualityDeletes.workFor(session, tableName, null)
    val choice = work.deletes.map { deletes =>
      val held = deletes.deleteSets.forall(set => synchronized(kept.contains((tableName, set.equalityIds))))
      MaintainRoundPlan.choose(LiveIndexSetting.Auto, facts(deletes, held)) match {
        case MaintainRoundPlan.ThroughIndex(why) => Seq("index", why)
        case MaintainRoundPlan.ReadingDataFiles(why) => Seq("reading", why)
      }
    }
    choice.getOrElse(Seq("nothing", "no equality deletes to resolve")).asJava
  }

  /**
   * The state of `tableName`'s kept indexes after a round (a job per index, for their bytes);
   * None when it has none and the round chose nothing. A store found lost here drops them: the
   * next round builds them again.
   */
  def state(session: SparkSession, tableName: String): Option[State] = {
    val indexes = indexesOf(tableName)
    val plan = Option(plans.get(tableName))
    val note = indexes.flatMap(_.news).headOption match {
      case Some(built) => Some(plan.map(p => s"$built (${p.why})").getOrElse(built))
      case None => plan.collect { case p: MaintainRoundPlan.ReadingDataFiles => p.why }
    }
    if (indexes.isEmpty) plan.map(_ => State(0, 0, note))
    else try Some(State(indexes.map(_.entries).sum, indexes.map(_.bytes(session)).sum, note,
      indexes.map(_.writtenThisRound).sum, indexes.map(_.storedBytes).sum))
    catch {
      case NonFatal(e) =>
        forget(session, tableName)
        Some(State(0, 0, Some(s"lost after the round (${Failures.describe(e)}); built again next round")))
    }
  }

  /**
   * For tests: deletes the executors' copies of `tableName`'s kept indexes behind the driver's
   * back, as an executor lost with them would: the next round's tasks load them from their checkpoints.
   */
  def loseStores(session: SparkSession, tableName: String): Unit = indexesOf(tableName).foreach(_.release(session))

  /**
   * Lets go of the kept indexes of `tableName` in this driver, once no round of it is under way,
   * as a restart does: their last saved versions stay, and the next round restores one and brings
   * it forward (a failure inside a round may have left the driver's state of them half changed;
   * what it saved before is whole).
   */
  def forget(session: SparkSession, tableName: String): Unit = forget(session, tableName, dropCheckpoints = false)

  /** [[forget]], and with `dropCheckpoints` their saved versions too (one cannot be loaded, or a rebuild is measured). */
  def forget(session: SparkSession, tableName: String, dropCheckpoints: Boolean): Unit = exclusively(tableName) {
    synchronized(kept.filter(_._1._1 == tableName).toVector).foreach { case ((_, set), index) =>
      synchronized(kept.remove((tableName, set)))
      try if (dropCheckpoints) index.dropAll(session) else index.release(session) catch {
        case NonFatal(e) => logWarning(s"eqdelete: letting go of a kept index of $tableName: ${e.getMessage}")
      }
    }
  }

  /** Drops the kept index of `tableName`'s equality set `set`, with every saved version of it: none is restored. */
  private def drop(session: SparkSession, tableName: String, set: Seq[Int], index: KeptLiveIndex): Unit = {
    synchronized(kept.remove((tableName, set)))
    try index.dropAll(session) catch {
      case NonFatal(e) => logWarning(s"eqdelete: dropping a kept index of $tableName: ${e.getMessage}")
    }
  }
}
