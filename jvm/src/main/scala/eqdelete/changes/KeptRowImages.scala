package eqdelete.changes

import java.util.concurrent.ConcurrentHashMap

import scala.collection.mutable
import scala.jdk.CollectionConverters._
import scala.util.Try
import scala.util.control.NonFatal

import eqdelete.commit.Failures
import eqdelete.deleteindex.KeyBytes
import eqdelete.liveindex.LiveKeyStore
import eqdelete.rowimages.{RowImageEntries, RowImageIndex, RowImageStore}
import eqdelete.state.{KeptStateDamagedException, KeptStores, StateFiles, StateLocation}

import org.apache.iceberg.{Schema, Snapshot, Table}
import org.apache.spark.internal.Logging
import org.apache.spark.rdd.RDD
import org.apache.spark.sql.{DataFrame, SparkSession}
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{AttributeReference, GenericInternalRow, JoinedRow, UnsafeRow}
import org.apache.spark.sql.catalyst.plans.logical.Statistics
import org.apache.spark.sql.eqdelete.compat.{EqDeleteConf, IcebergSparkTables, SparkShim}
import org.apache.spark.sql.types.{DataType, IntegerType, StructType}
import org.apache.spark.unsafe.Platform

/**
 * A table's live rows by key, kept on the executors ([[RowImageIndex]]) across the changes this
 * application reads, when `spark.eqdelete.changes.rowImages` is on: an exact upsert commit's
 * deleted rows (SnapshotDeleteKeys.exact: equality deletes global or partitioned by their keys, on exactly compared top-level
 * keys, nothing else deleting rows of older files) are its parent's live rows of its delete keys,
 * so they are looked up by those keys instead of read from the data files. A commit's changes then
 * cost what it changed, not the table; what it costs once is a full read of the parent of the first
 * snapshot that needs them, to build them.
 *
 * Kept images follow one lineage from the snapshot they were built at: a snapshot that changes no
 * row (a compaction, a resolve) changes nothing; one that only appends, or whose deletes are
 * exact on their key, has its delete keys' live rows marked removed at its sequence number and its
 * inserted rows added at it. A snapshot in another schema, any other delete, or a snapshot not
 * descending from the last one followed leaves them behind: the next read that needs them builds
 * them again (within one plan, only before its first lookup, whose stores it still reads; never
 * for a snapshot they already went past, which is read from the data files). One kept per table;
 * the one a build replaced is dropped at the next build, so a plan made on it still runs. Any
 * failure while they are built or brought forward drops them: they are never trusted half done.
 */
object KeptRowImages extends Logging {

  private final class Kept(val application: String, val table: String, val index: RowImageIndex, val schemaId: Int,
      val equalityIds: Seq[Int], val rowType: StructType, val keyOrdinals: Array[Int], val builtAt: Long) {
    /** The snapshots followed, oldest first (one lineage), and their sequence numbers: the versions lookups may ask for. */
    val versions = mutable.LinkedHashMap.empty[Long, Long]
    var live = 0L
    var removedSincePurge = 0L
    /** The changes of the snapshots followed since the last [[applyFollowed]]: applied in one job. */
    val followed = mutable.ArrayBuffer.empty[RDD[(Array[Byte], Array[Byte])]]
    def head: Long = versions.last._1
    def keyTypes: Array[DataType] = keyOrdinals.map(rowType(_).dataType)
  }

  private val kept = new ConcurrentHashMap[String, Kept]()
  private val retired = new ConcurrentHashMap[String, Kept]()
  private val locks = new ConcurrentHashMap[String, Object]()

  /** Versions kept answerable when removed entries are purged (as many snapshots back from the last followed). */
  private val AnswerableVersions = 64
  /** How far back from a snapshot to look for the last one followed. */
  private val MostSnapshotsBetween = 1000

  /** Deleted rows found in kept row images, in the images' columns and [[At]] (the snapshot's ordinal), and the ordinals found. */
  private[changes] final case class Found(rows: DataFrame, schema: Schema, ordinals: Set[Int])

  private[changes] val At = "_eqdelete_at"

  private val answeredSnapshots = new java.util.concurrent.atomic.AtomicLong()

  /** How many snapshots' deleted rows this JVM's kept row images have answered (in plans made): what a stream's plans do not show. */
  def snapshotsAnswered: Long = answeredSnapshots.get()

  private val builds = new java.util.concurrent.atomic.AtomicLong()
  private val restores = new java.util.concurrent.atomic.AtomicLong()

  /**
   * What this application's kept row images wrote to durable storage since they were built or
   * restored here, and what their current versions take there: `[written, stored]` bytes.
   */
  def checkpointed(session: SparkSession): Array[Long] = {
    val app = session.sparkContext.applicationId
    val mine = kept.values().asScala.filter(_.application == app).toSeq
    Array(mine.map(_.index.stores.written).sum, mine.map(_.index.stores.stored).sum)
  }

  /**
   * Lets go of every kept row image of this driver, their checkpoints kept: as a restart of the
   * application loses them (tests), so the next read restores them.
   */
  def forgetAll(session: SparkSession): Unit = (kept.keySet().asScala ++ retired.keySet().asScala).toVector.foreach { id =>
    locks.computeIfAbsent(id, _ => new Object).synchronized {
      (Option(kept.remove(id)) ++ Option(retired.remove(id))).foreach(k => Try(k.index.stores.release(session.sparkContext)))
    }
  }

  /** How many times this driver built kept row images from a full read, and restored them from a checkpoint. */
  def built: Long = builds.get()
  def restored: Long = restores.get()

  /** The bytes this application's kept row images hold on the executors' disks and in RocksDB's memtables. */
  def bytes(session: SparkSession): Long = {
    val app = session.sparkContext.applicationId
    (kept.values().asScala ++ retired.values().asScala).filter(_.application == app).map(_.index.bytes(session.sparkContext)).sum
  }

  /**
   * The deleted rows of those of `keyed` (in the range's order) that kept images answer, when the
   * session keeps them: each a whole, exact snapshot on the images' key, whose parent they
   * followed. None when the session does not keep them or they answer none; on a failure to build
   * or follow, which drops them, also None (the plan reads the data files).
   */
  private[changes] def deleted(session: SparkSession, table: Table,
      keyed: Seq[(SnapshotWork, SnapshotDeleteKeys)], stateRoot: Option[String]): Option[Found] = {
    val exact = keyed.filter { case (w, k) => k.exact && w.whole }
    if (!EqDeleteConf.changesRowImages(session.sessionState.conf) || exact.isEmpty) return None
    val ids = exact.head._2.equalityIds
    val files = StateLocation.of(session, table, stateRoot).under(s"$Kind/${ids.mkString("-")}")
    val id = s"${table.uuid()}@${files.root}"
    locks.computeIfAbsent(id, _ => new Object).synchronized {
      var images = Option(kept.get(id)).filter(k => k.application == session.sparkContext.applicationId && k.equalityIds == ids)
      try {
        if (images.isEmpty) images = restore(session, table, id, files, ids)
        // Before this plan's lookups: never below a version it asks for.
        images.foreach(purgeWhenDue(session, _))
        val answered = mutable.ArrayBuffer.empty[(SnapshotWork, SnapshotDeleteKeys, Long)]
        for ((w, keys) <- exact if keys.equalityIds == ids; parent <- Option(table.snapshot(w.snapshot.parentId().longValue))) {
          val reached = images.exists(k => followedTo(session, table, k, parent))
          if (!reached && answered.isEmpty && !images.exists(k => wentPast(table, k, parent)) &&
              keyTypes(ChangesPlan.schemaOf(table, parent), ids).contains(deleteKeyTypes(keys, ids.size))) {
            images.foreach(applyFollowed(session, _))  // what they followed, as the plans made on them expect
            images = Some(build(session, table, id, files, parent, ids))
          }
          images.filter(k => k.versions.contains(parent.snapshotId()) && sameKeyTypes(k, keys)).foreach { k =>
            answered += ((w, keys, k.versions(parent.snapshotId())))
            follow(session, table, k, w.snapshot, Some((w, keys)))
          }
        }
        images.foreach(applyFollowed(session, _))
        answeredSnapshots.addAndGet(answered.size)
        images.filter(_ => answered.nonEmpty).map(k => Found(lookup(session, k, answered.toSeq),
          table.schemas().get(k.schemaId), answered.map(_._1.ordinal).toSet))
      } catch {
        case e: Throwable =>
          // Anything, fatal included, may have left the driver's state of them half brought forward; the
          // version saved last is whole, and the next read restores it: unless a store of it was found
          // damaged (where it is saved, or linked to it), when its saved versions go too and the next
          // read builds them. A store that could not be reached is no reason to drop them.
          Option(kept.remove(id)).foreach(k => Try(k.index.stores.release(session.sparkContext)))
          if (Failures.causes(e).exists(_.isInstanceOf[KeptStateDamagedException])) Try(files.deleteAll())
          if (!NonFatal(e)) throw e
          logWarning(s"eqdelete: the kept row images of ${table.name()} are dropped, and its changes read from its " +
            s"data files: ${e.getMessage}", e)
          None
      }
    }
  }

  /** The kept images' rows of each answered snapshot's delete keys, live at its parent. */
  private def lookup(session: SparkSession, k: Kept, answered: Seq[(SnapshotWork, SnapshotDeleteKeys, Long)]): DataFrame = {
    val keys: RDD[(Array[Byte], (Long, Int))] = session.sparkContext.union(answered.map { case (w, deletes, version) =>
      val ordinal = w.ordinal
      packed(k, deletes).map(key => (LiveKeyStore.keyPrefix(key, key.length), (version, ordinal)))
    })
    val fields = k.rowType.length
    val rows = k.index.lookup(keys).mapPartitions { found =>
      val at = new GenericInternalRow(1)
      val joined = new JoinedRow()
      found.map { case (ordinal, bytes) =>
        val row = new UnsafeRow(fields)
        row.pointTo(bytes, Platform.BYTE_ARRAY_OFFSET, bytes.length)
        at.setInt(0, ordinal)
        joined(row, at): InternalRow
      }
    }
    val output = k.rowType.fields.toSeq.map(f => AttributeReference(f.name, f.dataType, f.nullable)()) :+
      AttributeReference(At, IntegerType, nullable = false)()
    val records = answered.map(_._1.byKeys.fold(0L)(_.records)).sum
    val label = s"of snapshot(s) ${answered.map(_._1.snapshot.snapshotId()).mkString(", ")} at their parents " +
      s"(${k.index.partitions} stores, kept since snapshot ${k.builtAt})"
    SparkShim.dataFrame(session, RowImagesRelation(output, rows, label,
      Statistics(sizeInBytes = BigInt(math.max(records, 1L)) * 64, rowCount = Some(BigInt(records)))))
  }

  /** A snapshot's delete keys, each packed as the images pack their rows' keys. */
  private def packed(k: Kept, keys: SnapshotDeleteKeys): RDD[Array[Byte]] = {
    val types = k.keyTypes
    val ordinals = types.indices.toArray
    keys.deleteKeys.queryExecution.toRdd.map(row => KeyBytes.packed(row, ordinals, types))
  }

  /** The Spark types of key fields `ids` in `schema`, when all are top-level columns. */
  private def keyTypes(schema: Schema, ids: Seq[Int]): Option[Seq[DataType]] = {
    val struct = IcebergSparkTables.sparkSchema(schema)
    val names = ids.map(i => Option(schema.findField(i)).map(_.name()).filter(n => schema.columns().asScala.exists(_.name() == n)))
    if (names.forall(_.isDefined)) Some(names.flatten.map(struct(_).dataType)) else None
  }

  private def deleteKeyTypes(keys: SnapshotDeleteKeys, n: Int): Seq[DataType] = keys.deleteKeys.schema.fields.take(n).map(_.dataType).toSeq

  private def sameKeyTypes(k: Kept, keys: SnapshotDeleteKeys): Boolean = deleteKeyTypes(keys, k.keyOrdinals.length) == k.keyTypes.toSeq

  /** `snapshot` and its ancestors, newest first, as far as [[MostSnapshotsBetween]] and the table's metadata go. */
  private def ancestors(table: Table, snapshot: Snapshot): Vector[Snapshot] =
    Iterator.iterate(Option(snapshot))(_.flatMap(s => Option(s.parentId()).flatMap(p => Option(table.snapshot(p)))))
      .take(MostSnapshotsBetween).takeWhile(_.isDefined).flatten.toVector

  /** Whether `k` followed a descendant of `snapshot` (went past it, or purged it): building them there would go back. */
  private def wentPast(table: Table, k: Kept, snapshot: Snapshot): Boolean =
    Option(table.snapshot(k.head)).exists(head => ancestors(table, head).exists(_.snapshotId() == snapshot.snapshotId()))

  /**
   * Whether `k` follows `snapshot`: brought forward to it from the last snapshot it followed,
   * through the snapshots between, when each can be followed.
   */
  private def followedTo(session: SparkSession, table: Table, k: Kept, snapshot: Snapshot): Boolean =
    k.versions.contains(snapshot.snapshotId()) || {
      val between = ancestors(table, snapshot).takeWhile(_.snapshotId() != k.head).reverse
      between.headOption.exists(first => Option(first.parentId()).exists(_.longValue == k.head)) &&
        between.forall(s => follow(session, table, k, s, None))
    }

  /**
   * Brings `k` forward by `snapshot`, a child of the last snapshot it followed, when it can be
   * followed (see above): whether it was. `known`, when given, is its work and delete keys. Its
   * changes are applied with those of the other snapshots followed for the same read
   * ([[applyFollowed]]), before any plan reads them.
   */
  private def follow(session: SparkSession, table: Table, k: Kept, snapshot: Snapshot,
      known: Option[(SnapshotWork, SnapshotDeleteKeys)]): Boolean = {
    if (k.versions.contains(snapshot.snapshotId())) return true
    // Versions must grow along the lineage (a table upgraded from format v1 numbers its old snapshots 0).
    if (!Option(snapshot.parentId()).map(_.longValue).contains(k.head) || snapshot.sequenceNumber() <= k.versions(k.head) ||
        ChangesPlan.schemaOf(table, snapshot).schemaId() != k.schemaId) return false
    // What it inserts, and the delete keys whose live rows it removes: none for a snapshot that changes no row.
    val change: Option[(Set[String], Option[SnapshotDeleteKeys])] = known match {
      case Some((w, keys)) => Some((w.added, Some(keys)))
      case None =>
        val files = SnapshotChangeFiles.of(table, snapshot)
        if (files.unchanged.isDefined) Some((Set.empty, None))
        else if (files.touched.isEmpty) Some((files.added, None))
        else SnapshotDeleteKeys.of(session, table, SnapshotWork(snapshot, 0, files.touched, files.added, files.byKeys,
          whole = true, files.everyParentFile), ChangesPlan.schemaOf(table, table.snapshot(k.head))).map(d => (files.added, Some(d)))
    }
    change.filter(_._2.forall(d => d.exact && d.equalityIds == k.equalityIds && sameKeyTypes(k, d))).exists { case (added, deletes) =>
      val version = snapshot.sequenceNumber()
      val inserts = if (added.isEmpty) None else Some(
        encoded(session, k, ChangesPlan.liveRows(session, table, snapshot.snapshotId(), added), added) { (key, file, position, row) =>
          (RowImageStore.insertChange(key, version, file, position), row)
        })
      val removals = deletes.map(d => packed(k, d).map(key => (RowImageStore.deleteChange(key, version), Array.emptyByteArray)))
      k.followed ++= inserts.toSeq ++ removals.toSeq
      k.versions(snapshot.snapshotId()) = version
      true
    }
  }

  /** Applies the changes of the snapshots `k` followed since the last time, in one job (a store applies a key's in version order). */
  private def applyFollowed(session: SparkSession, k: Kept): Unit = if (k.followed.nonEmpty) {
    val (inserted, removed) = k.index.apply(session.sparkContext.union(k.followed.toSeq))
    k.followed.clear()
    k.live += inserted - removed
    k.removedSincePurge += removed
    save(k)
  }

  /** Purges removed rows once they are as many as the live ones, keeping the last followed versions answerable. */
  private def purgeWhenDue(session: SparkSession, k: Kept): Unit =
    if (k.removedSincePurge > math.max(k.live, 1000000L) && k.versions.size > AnswerableVersions) {
      val from = k.versions.values.toSeq.takeRight(AnswerableVersions).head
      k.index.purge(session.sparkContext, from)
      k.versions --= k.versions.collect { case (id, version) if version < from => id }.toSeq
      k.removedSincePurge = 0
      save(k)
    }

  private val Kind = "row-images"
  private val Mapper = new com.fasterxml.jackson.databind.ObjectMapper()

  /** Saves the images' version with the driver's state of them, so a restart (a stream's too) restores them. */
  private def save(k: Kept): Unit = {
    val node = Mapper.createObjectNode()
    node.put("kind", Kind)
    node.put("table", k.table)
    node.put("schemaId", k.schemaId)
    val ids = node.putArray("equalityIds")
    k.equalityIds.foreach(ids.add(_))
    node.put("rowType", k.rowType.json)
    val ordinals = node.putArray("keyOrdinals")
    k.keyOrdinals.foreach(ordinals.add(_))
    node.put("builtAt", k.builtAt)
    val versions = node.putArray("versions")
    k.versions.foreach { case (snapshot, version) => versions.addObject().put("snapshot", snapshot).put("version", version) }
    node.put("live", k.live)
    node.put("removedSincePurge", k.removedSincePurge)
    k.index.stores.save(node)
  }

  /**
   * The newest images of `table` on key `ids` saved under `files` (before a restart, say) whose
   * stores all load and verify ([[KeptStores.newestLoadable]]), if any: a failure to read them is none.
   */
  private def restore(session: SparkSession, table: Table, id: String, files: StateFiles, ids: Seq[Int]): Option[Kept] = {
    val uuid = table.uuid().toString
    RowImageIndex.restoreNewest(session, files, s"kept row images of ${table.name()}") { d =>
      d.path("kind").asText() == Kind && d.path("table").asText() == uuid &&
        d.get("equalityIds").elements().asScala.map(_.asInt()).toSeq == ids
    } { (index, d) =>
      val k = new Kept(session.sparkContext.applicationId, uuid, index, d.get("schemaId").asInt(), ids,
        DataType.fromJson(d.get("rowType").asText()).asInstanceOf[StructType],
        d.get("keyOrdinals").elements().asScala.map(_.asInt()).toArray, d.get("builtAt").asLong())
      d.get("versions").elements().asScala.foreach(v => k.versions(v.get("snapshot").asLong()) = v.get("version").asLong())
      k.live = d.get("live").asLong()
      k.removedSincePurge = d.get("removedSincePurge").asLong()
      k
    } (_.index).map { case (k, version) =>
      kept.put(id, k)
      restores.incrementAndGet()
      logInfo(s"eqdelete: kept row images of ${table.name()} restored from version $version in ${files.root}, " +
        s"following snapshot ${k.head}")
      k
    }
  }

  /** New images of `parent`'s live rows, replacing the table's kept ones (dropped at the next build). */
  private def build(session: SparkSession, table: Table, id: String, files: StateFiles, parent: Snapshot,
      ids: Seq[Int]): Kept = {
    val sc = session.sparkContext
    Option(retired.remove(id)).foreach(old => Try(old.index.drop(sc)))
    Option(kept.remove(id)).foreach(old => retired.put(id, old))
    val schema = ChangesPlan.schemaOf(table, parent)
    val dataFiles = scala.util.Using.resource(table.newScan().useSnapshot(parent.snapshotId()).planFiles())(
      _.asScala.map(_.file().location()).toSet)
    val rows = ChangesPlan.liveRows(session, table, parent.snapshotId(), dataFiles, whole = true)
    val rowType = StructType(rows.schema.fields.dropRight(2))
    val keyNames = ids.map(i => schema.findField(i).name())
    val k = new Kept(sc.applicationId, table.uuid().toString, RowImageIndex.created(session, files), schema.schemaId(), ids,
      rowType, keyNames.map(n => rowType.fieldNames.indexOf(n)).toArray, parent.snapshotId())
    kept.put(id, k)
    builds.incrementAndGet()
    val version = parent.sequenceNumber()
    k.live = k.index.load(encoded(session, k, rows, dataFiles) { (key, file, position, row) =>
      (RowImageStore.entry(key, version, file, position), RowImageStore.liveValue(row))
    })
    k.versions(parent.snapshotId()) = version
    save(k)
    logInfo(s"eqdelete: kept row images of ${table.name()} built at snapshot ${parent.snapshotId()}: ${k.live} rows " +
      s"in ${k.index.partitions} stores")
    k
  }

  /**
   * `rows` (the images' columns, `_file`, `_pos`) of data files `files` as `make(key, file, position,
   * row bytes)`, a file named by its place among `files` in order: what tells two rows of a key
   * apart within the one version they are added at.
   */
  private def encoded(session: SparkSession, k: Kept, rows: DataFrame, files: Set[String])(
      make: (Array[Byte], Int, Long, Array[Byte]) => (Array[Byte], Array[Byte])): RDD[(Array[Byte], Array[Byte])] =
    RowImageEntries.encoded(rows, k.rowType, k.keyOrdinals, files.toSeq.sorted.zipWithIndex.toMap)(make)
}
