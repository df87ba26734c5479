package eqdelete.resolve

import java.util.concurrent.ConcurrentHashMap

import scala.collection.mutable
import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import eqdelete.commit.Failures
import eqdelete.liveindex.LiveKeyIndex
import eqdelete.resolve.ResolveEqualityDeletes.FoundPositions

import org.apache.spark.internal.Logging
import org.apache.spark.rdd.RDD
import org.apache.spark.sql.{Row, SparkSession}
import org.apache.spark.sql.types.{LongType, StringType, StructField, StructType}
import org.apache.spark.storage.StorageLevel

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

  /** A table's kept indexes after a round: their entries and bytes, and how the round built them (None: brought forward). */
  final case class State(entries: Long, bytes: Long, built: Option[String])

  /** Runs `body` with `tableName`'s kept indexes to itself: two rounds of one table never bring them forward at once. */
  def exclusively[A](tableName: String)(body: => A): A = tables.computeIfAbsent(tableName, _ => new Object).synchronized(body)

  /**
   * The first half of a resolve of `tableName` whose positions are found through its kept
   * indexes (each brought to the round's snapshot first, `stores` stores when built); its
   * commit is [[ResolveEqualityDeletes]]'s, after which the positions it resolved leave the
   * indexes. Call it within [[exclusively]].
   */
  def prepare(session: SparkSession, tableName: String, stores: Int): ResolveEqualityDeletes.Prepared =
    prepared(session, tableName, stores, alsoToday = false)._1

  /** The positions a resolve found (`file#pos`, sorted): today's plan's (when asked for), and the index's once it commits. */
  private final class Seen { var today = Seq.empty[String]; var indexed = Seq.empty[String] }

  private def prepared(session: SparkSession, tableName: String, stores: Int,
      alsoToday: Boolean): (ResolveEqualityDeletes.Prepared, Seen) = {
    val seen = new Seen
    var found = Seq.empty[(KeptLiveIndex, RDD[IndexedDeletedPositions.Found])]
    def release(): Unit = found.foreach(_._2.unpersist())
    def settled(result: Option[ResolveEqualityDeletes.Result]): Unit =
      try {
        if (alsoToday) seen.indexed = found.flatMap(_._2.map(f => s"${f.path}#${f.position}").collect()).distinct.sorted
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
        found = deletes.deleteSets.map { set =>
          val key = (tableName, set.equalityIds)
          // The round has the table to itself (exclusively): no other creates its index meanwhile.
          val index = synchronized(kept.get(key)).getOrElse {
            val created = KeptLiveIndex.create(session, stores)
            synchronized(kept(key) = created)
            created
          }
          index -> index.positions(session, work, deletes, set, stores).persist(StorageLevel.MEMORY_AND_DISK)
        }
        // One set's finds are each found once at their store; several sets' may find one row each.
        val once = found.map(_._2.mapPartitions(rows => LiveKeyIndex.onceEach(rows)(_.entry).map(f => (f.path, f.position))))
        val positions = if (once.size == 1) once.head else session.sparkContext.union(once).distinct()
        val rows = positions.map { case (f, p) => Row(f, p) }
        FoundPositions(session.createDataFrame(rows, Positions), found.map(_._1.lastFilesRead).sum)
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

  /** A round of `tableName` begins (before its first attempt): its indexes' news of the last round is cleared. */
  def beginRound(tableName: String): Unit = indexesOf(tableName).foreach(_.beginRound())

  private def indexesOf(tableName: String): Vector[KeptLiveIndex] =
    synchronized(kept.collect { case ((t, _), index) if t == tableName => index }.toVector)

  /** For the differential test: a round through the kept indexes; (today's positions, the index's, rows resolved). */
  def roundBothWays(session: SparkSession, tableName: String): (java.util.List[String], java.util.List[String], Long) =
    exclusively(tableName) {
      beginRound(tableName)
      val (prepared, seen) = this.prepared(session, tableName, stores = 3, alsoToday = true)
      val result = prepared.commit()
      (seen.today.asJava, seen.indexed.asJava, result.rowsResolved)
    }

  /**
   * The state of `tableName`'s kept indexes after a round (a job per index, for their bytes);
   * None when it has none. A store found lost here drops them: the next round builds them again.
   */
  def state(session: SparkSession, tableName: String): Option[State] = {
    val indexes = indexesOf(tableName)
    if (indexes.isEmpty) None
    else try Some(State(indexes.map(_.entries).sum, indexes.map(_.bytes(session)).sum, indexes.flatMap(_.lastBuild).headOption))
    catch {
      case NonFatal(e) =>
        forget(session, tableName)
        Some(State(0, 0, Some(s"lost after the round (${Failures.describe(e)}); built again next round")))
    }
  }

  /** For tests: deletes the stores of `tableName`'s kept indexes behind the driver's back, as an executor lost with them would. */
  def loseStores(session: SparkSession, tableName: String): Unit = indexesOf(tableName).foreach(_.drop(session))

  /**
   * Drops the kept indexes of `tableName` (a restart loses them so; so does a store lost with its
   * executor), once no round of it is under way.
   */
  def forget(session: SparkSession, tableName: String): Unit = exclusively(tableName) {
    val dropped = synchronized(kept.keys.filter(_._1 == tableName).toVector.flatMap(kept.remove))
    dropped.foreach { index =>
      try index.drop(session) catch {
        // A store lost with its executor is gone already; the others are deleted with their executors' files.
        case NonFatal(e) => logWarning(s"eqdelete: dropping a kept index of $tableName: ${e.getMessage}")
      }
    }
  }
}
