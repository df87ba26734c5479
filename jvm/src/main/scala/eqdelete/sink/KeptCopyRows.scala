package eqdelete.sink

import java.util.concurrent.ConcurrentHashMap

import scala.collection.mutable
import scala.jdk.CollectionConverters._
import scala.util.Try
import scala.util.control.NonFatal

import eqdelete.changes.{ChangesPlan, RowImagesRelation}
import eqdelete.commit.Failures
import eqdelete.deleteindex.KeyBytes
import eqdelete.liveindex.LiveKeyStore
import eqdelete.rowimages.{RowImageEntries, RowImageIndex, RowImageStore}
import eqdelete.state.{KeptStateDamagedException, StateFiles, StateLocation}

import org.apache.iceberg.{Snapshot, Table}
import org.apache.spark.internal.Logging
import org.apache.spark.rdd.RDD
import org.apache.spark.sql.{functions => F, DataFrame, SparkSession}
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{AttributeReference, GenericInternalRow, JoinedRow, UnsafeRow}
import org.apache.spark.sql.catalyst.plans.logical.Statistics
import org.apache.spark.sql.eqdelete.compat.{EqDeleteConf, IcebergInternals, IcebergSparkTables, SparkShim}
import org.apache.spark.sql.types.{BinaryType, DataType, LongType, StringType, StructType}
import org.apache.spark.unsafe.Platform
import org.apache.spark.unsafe.types.UTF8String

/**
 * A copy's live rows by key, kept on the executors ([[RowImageIndex]]) for `apply_changes` with
 * keys, when `spark.eqdelete.sink.keptRows` is on: a batch's removed rows are looked up by their
 * keys, with the data file and position of each, instead of found by reading the copy. A batch
 * then costs its rows; what it costs once is a full read of the copy, to build them.
 *
 * They follow the copy's lineage from the snapshot they were built at: an apply brings them
 * forward by its own commit (the rows it removed, named by their entries; the rows of the data
 * files it added, read back); an append of others' (new data files only) by the rows it added.
 * Any other commit (a compaction moves rows, another writer's deletes, a schema change) leaves
 * them behind, and the next apply builds them again. Only the lookups are theirs: the rows found
 * are matched to the removed ones whole and counted as a read of the copy's are, so they can
 * only make an apply find its rows sooner, never other rows. Any failure while they are built or
 * brought forward drops them (the apply reads the copy); they are never trusted half done.
 */
object KeptCopyRows extends Logging {

  private final class Kept(val application: String, val table: String, val index: RowImageIndex, val schemaId: Int,
      val keyIds: Seq[Int], val rowType: StructType, val keyOrdinals: Array[Int]) {
    /** The snapshot followed last, and its sequence number: the version lookups are made at. */
    var head = 0L
    var version = 0L
    /** Data files by the id their entries name them with. */
    val files = mutable.LinkedHashMap.empty[Int, String]
    var live = 0L
    var removedSincePurge = 0L
    def keyTypes: Array[DataType] = keyOrdinals.map(rowType(_).dataType)
    def nextFileId: Int = if (files.isEmpty) 0 else files.keys.max + 1
  }

  /**
   * The kept rows one apply reads the copy's rows at `snapshot` from (its lookups and, after its
   * commit, [[forward]]): their version and data files as they were there, whatever another
   * thread's apply does to them meanwhile.
   */
  final class Held private[KeptCopyRows] (private[KeptCopyRows] val kept: Kept, private[KeptCopyRows] val id: String,
      private[KeptCopyRows] val files: StateFiles, val snapshot: Long, private[KeptCopyRows] val version: Long,
      private[KeptCopyRows] val dataFiles: Map[Int, String])

  /** The column naming a found row's entry, which [[forward]] removes it by. */
  val Entry = "_eqdelete_entry"

  private val kept = new ConcurrentHashMap[String, Kept]()
  private val retired = new ConcurrentHashMap[String, Kept]()
  private val locks = new ConcurrentHashMap[String, Object]()
  private val Kind = "copy-rows"
  private val Mapper = new com.fasterxml.jackson.databind.ObjectMapper()

  private val builds = new java.util.concurrent.atomic.AtomicLong()
  private val restores = new java.util.concurrent.atomic.AtomicLong()

  /** How many times this driver built a copy's kept rows from a full read, and restored them from a checkpoint. */
  def built: Long = builds.get()
  def restored: Long = restores.get()

  /** Lets go of every copy's kept rows of this driver, their checkpoints kept: as a restart does (tests). */
  def forgetAll(session: SparkSession): Unit = (kept.keySet().asScala ++ retired.keySet().asScala).toVector.foreach { id =>
    locks.computeIfAbsent(id, _ => new Object).synchronized {
      (Option(kept.remove(id)) ++ Option(retired.remove(id))).foreach(k => Try(k.index.stores.release(session.sparkContext)))
    }
  }

  /**
   * The copy's kept rows on `keys`, at `snapshot` (which must be `table`'s schema's): restored or
   * built there, or brought forward to it. None when the session does not keep them, when they
   * cannot hold these keys (a key not a top-level column), or on a failure, which drops them.
   */
  def at(session: SparkSession, table: Table, snapshot: Long, keys: Seq[String]): Option[Held] = {
    // A v1 copy takes no deletes by position (nor numbers its snapshots' sequences): nothing to keep them for.
    if (!EqDeleteConf.sinkKeptRows(session.sessionState.conf) || keys.isEmpty || IcebergInternals.formatVersion(table) < 2) return None
    val schema = table.schema()
    val fields = keys.map(k => Option(schema.caseInsensitiveFindField(k)).filter(f => schema.columns().asScala.exists(_.fieldId() == f.fieldId())))
    val read = table.snapshot(snapshot)
    if (fields.exists(_.isEmpty) || read == null || ChangesPlan.schemaOf(table, read).schemaId() != schema.schemaId()) return None
    val ids = fields.flatten.map(_.fieldId())
    val files = StateLocation.of(session, table).under(s"$Kind/${ids.mkString("-")}")
    val id = s"${table.uuid()}@${files.root}"
    locks.computeIfAbsent(id, _ => new Object).synchronized {
      var rows = Option(kept.get(id)).filter(k => k.application == session.sparkContext.applicationId && k.keyIds == ids)
      try {
        if (rows.isEmpty) rows = restore(session, table, id, files, ids, read)
        rows = rows.filter(k => k.schemaId == schema.schemaId() && followedTo(session, table, k, read))
        if (rows.isEmpty) rows = Some(build(session, table, id, files, read, ids))
        rows.foreach(purgeWhenDue(session, _))
        rows.map(k => new Held(k, id, files, snapshot, k.version, k.files.toMap))
      } catch {
        case e: Throwable =>
          drop(session, table, id, files, e, "read")
          if (!NonFatal(e)) throw e
          None
      }
    }
  }

  /**
   * The copy's rows at the held snapshot whose keys are those of `keys` (the key columns, in the
   * kept rows' order; cast to their types), with `_file`, `_pos` and [[Entry]]: lazily, a lookup at
   * the stores when the plan runs.
   */
  def rowsOf(session: SparkSession, held: Held, keys: DataFrame): DataFrame = {
    val k = held.kept
    val (types, ordinals) = (k.keyTypes, k.keyTypes.indices.toArray)
    val typed = keys.select(keys.columns.toSeq.zip(types).map { case (c, t) => F.col(ChangesPlan.quote(c)).cast(t) }: _*)
    val prefixes: RDD[Array[Byte]] = typed.queryExecution.toRdd.map { row =>
      val key = KeyBytes.packed(row, ordinals, types)
      LiveKeyStore.keyPrefix(key, key.length)
    }
    val names = session.sparkContext.broadcast(held.dataFiles)
    val fields = k.rowType.length
    val rows = k.index.entries(prefixes, held.version).mapPartitions { found =>
      val where = new GenericInternalRow(3)
      val joined = new JoinedRow()
      found.map { case (entry, bytes) =>
        val row = new UnsafeRow(fields)
        row.pointTo(bytes, Platform.BYTE_ARRAY_OFFSET, bytes.length)
        where.update(0, UTF8String.fromString(names.value(RowImageStore.fileOf(entry))))
        where.setLong(1, RowImageStore.positionOf(entry))
        where.update(2, entry)
        joined(row, where): InternalRow
      }
    }
    val output = k.rowType.fields.toSeq.map(f => AttributeReference(f.name, f.dataType, f.nullable)()) ++
      Seq(AttributeReference("_file", StringType, nullable = false)(), AttributeReference("_pos", LongType, nullable = false)(),
        AttributeReference(Entry, BinaryType, nullable = false)())
    SparkShim.dataFrame(session, RowImagesRelation(output, rows, s"of the copy's rows of the keys removed, at snapshot " +
      s"${held.snapshot} (${k.index.partitions} stores, ${k.live} rows)", Statistics(sizeInBytes = BigInt(1) << 20)))
  }

  /**
   * Brings the held rows forward by the apply's commit `committed` (a child of the held snapshot):
   * the `deleted` rows of `removed` ([[Entry]], the rows found that it deleted) removed, the
   * `inserted` rows of data files `added` added; other counts drop them (they would not be the
   * copy's rows). When another commit came between, or they moved on meanwhile, nothing: the next
   * apply follows or builds them. A failure drops them; the commit stands either way.
   */
  def forward(session: SparkSession, table: Table, held: Held, committed: Long, removed: Option[DataFrame], deleted: Long,
      added: Seq[String], inserted: Long): Unit = locks.computeIfAbsent(held.id, _ => new Object).synchronized {
    val k = held.kept
    val snapshot = table.snapshot(committed)
    if ((kept.get(held.id) eq k) && k.head == held.snapshot && snapshot != null &&
        Option(snapshot.parentId()).exists(_.longValue == held.snapshot) && snapshot.sequenceNumber() > k.version) {
      try {
        val version = snapshot.sequenceNumber()
        val inserts = insertsOf(session, table, k, snapshot, added)
        val removals = removed.map(_.select(Entry).queryExecution.toRdd.map(row =>
          (RowImageStore.removeChange(row.getBinary(0), version), Array.emptyByteArray)))
        val counted = moveTo(session, k, snapshot, inserts.toSeq ++ removals.toSeq)
        if (counted != ((inserted, deleted))) {
          throw new IllegalStateException(s"the commit inserted $inserted and deleted $deleted rows; bringing them " +
            s"forward inserted ${counted._1} and removed ${counted._2}")
        }
      } catch {
        case e: Throwable =>
          drop(session, table, held.id, held.files, e, "brought forward")
          if (!NonFatal(e)) throw e
      }
    }
  }

  /** The rows of data files `added`, live at `snapshot`, as changes inserting them at its version, under new file ids. */
  private def insertsOf(session: SparkSession, table: Table, k: Kept, snapshot: Snapshot,
      added: Seq[String]): Option[RDD[(Array[Byte], Array[Byte])]] = if (added.isEmpty) None else {
    val version = snapshot.sequenceNumber()
    val ids = added.sorted.zipWithIndex.map { case (f, i) => f -> (k.nextFileId + i) }.toMap
    // A `_file` filter: eqdelete's rule reads only those files, planned from the snapshot's own manifests.
    val rows = ChangesPlan.pinnedRows(session, table, snapshot.snapshotId()).where(F.col("_file").isin(added: _*))
    val changes = RowImageEntries.encoded(rows, k.rowType, k.keyOrdinals, ids) { (key, file, position, row) =>
      (RowImageStore.insertChange(key, version, file, position), row)
    }
    ids.foreach { case (f, i) => k.files(i) = f }
    Some(changes)
  }

  /** Applies `changes` in one job and makes `snapshot` the one followed; saved. How many entries were (inserted, removed). */
  private def moveTo(session: SparkSession, k: Kept, snapshot: Snapshot,
      changes: Seq[RDD[(Array[Byte], Array[Byte])]]): (Long, Long) = {
    val counted = if (changes.isEmpty) (0L, 0L) else k.index.apply(session.sparkContext.union(changes))
    k.live += counted._1 - counted._2
    k.removedSincePurge += counted._2
    k.head = snapshot.snapshotId()
    k.version = snapshot.sequenceNumber()
    save(k)
    counted
  }

  /**
   * Whether `k` follows `snapshot`: it is the one followed last, or descends from it by commits
   * that only add data files (no file removed, no delete added or removed), whose rows are then added.
   */
  private def followedTo(session: SparkSession, table: Table, k: Kept, snapshot: Snapshot): Boolean = k.head == snapshot.snapshotId() || {
    val between = Iterator.iterate(Option(snapshot))(_.flatMap(s => Option(s.parentId()).flatMap(p => Option(table.snapshot(p)))))
      .take(1000).takeWhile(_.exists(_.snapshotId() != k.head)).flatten.toVector.reverse
    val io = table.io()
    val appends = between.headOption.exists(first => Option(first.parentId()).exists(_.longValue == k.head)) && between.forall { s =>
      s.sequenceNumber() > k.version && s.removedDataFiles(io).asScala.isEmpty &&
        s.addedDeleteFiles(io).asScala.isEmpty && s.removedDeleteFiles(io).asScala.isEmpty
    }
    appends && {
      val added = between.flatMap(_.addedDataFiles(io).asScala)
      val inserts = insertsOf(session, table, k, snapshot, added.map(_.location()))
      val (inserted, _) = moveTo(session, k, snapshot, inserts.toSeq)
      if (inserted != added.map(_.recordCount()).sum) {
        throw new IllegalStateException(s"the appends since snapshot ${between.head.parentId()} added " +
          s"${added.map(_.recordCount()).sum} rows; bringing them forward inserted $inserted")
      }
      true
    }
  }

  /** Purges removed rows once they are as many as the live ones (lookups are made at the head only). */
  private def purgeWhenDue(session: SparkSession, k: Kept): Unit =
    if (k.removedSincePurge > math.max(k.live, 1000000L)) {
      k.index.purge(session.sparkContext, k.version)
      k.removedSincePurge = 0
      save(k)
    }

  /** Drops the held rows after their lookup failed with `e` (the apply then reads the copy). */
  def lookupFailed(session: SparkSession, table: Table, held: Held, e: Throwable): Unit =
    locks.computeIfAbsent(held.id, _ => new Object).synchronized {
      if (kept.get(held.id) eq held.kept) drop(session, table, held.id, held.files, e, "looked up")
    }

  /** The live rows copy `tableName`'s kept rows on `keys` (comma-separated) hold, or -1 where this driver keeps none (tests). */
  def liveRows(session: SparkSession, tableName: String, keys: String): Long = {
    val table = IcebergSparkTables.current(session, tableName)
    val ids = keys.split(",").toSeq.map(k => table.schema().caseInsensitiveFindField(k.trim).fieldId())
    kept.values().asScala.find(k => k.table == table.uuid().toString && k.keyIds == ids).fold(-1L)(_.live)
  }

  /** Drops `id`'s kept rows after `e`; their checkpoints too when a store of them was found damaged. */
  private def drop(session: SparkSession, table: Table, id: String, files: StateFiles, e: Throwable, doing: String): Unit = {
    Option(kept.remove(id)).foreach(k => Try(k.index.stores.release(session.sparkContext)))
    if (Failures.causes(e).exists(_.isInstanceOf[KeptStateDamagedException])) Try(files.deleteAll())
    logWarning(s"eqdelete: the kept rows of copy ${table.name()} could not be $doing and are dropped; apply_changes " +
      s"reads the copy until the next apply builds them: ${e.getMessage}", e)
  }

  /** New kept rows of the copy's live rows at `snapshot`, replacing the copy's (dropped at the next build). */
  private def build(session: SparkSession, table: Table, id: String, files: StateFiles, snapshot: Snapshot, ids: Seq[Int]): Kept = {
    val sc = session.sparkContext
    Option(retired.remove(id)).foreach(old => Try(old.index.drop(sc)))
    Option(kept.remove(id)).foreach(old => retired.put(id, old))
    val schema = ChangesPlan.schemaOf(table, snapshot)
    val dataFiles = scala.util.Using.resource(table.newScan().useSnapshot(snapshot.snapshotId()).planFiles())(
      _.asScala.map(_.file().location()).toVector.distinct.sorted)
    val rows = ChangesPlan.pinnedRows(session, table, snapshot.snapshotId())
    val rowType = StructType(rows.schema.fields.dropRight(2))
    val keyNames = ids.map(i => schema.findField(i).name())
    val k = new Kept(sc.applicationId, table.uuid().toString, RowImageIndex.created(session, files), schema.schemaId(), ids,
      rowType, keyNames.map(n => rowType.fieldNames.indexOf(n)).toArray)
    kept.put(id, k)
    builds.incrementAndGet()
    val version = snapshot.sequenceNumber()
    dataFiles.zipWithIndex.foreach { case (f, i) => k.files(i) = f }
    k.live = k.index.load(RowImageEntries.encoded(rows, rowType, k.keyOrdinals, dataFiles.zipWithIndex.toMap) {
      (key, file, position, row) => (RowImageStore.entry(key, version, file, position), RowImageStore.liveValue(row))
    })
    k.head = snapshot.snapshotId()
    k.version = version
    save(k)
    logInfo(s"eqdelete: kept rows of copy ${table.name()} built at snapshot ${k.head}: ${k.live} rows in " +
      s"${k.index.partitions} stores")
    k
  }

  /** Saves the rows' version with the driver's state of them, so a restart restores them. */
  private def save(k: Kept): Unit = {
    val node = Mapper.createObjectNode()
    node.put("kind", Kind)
    node.put("table", k.table)
    node.put("schemaId", k.schemaId)
    val ids = node.putArray("keyIds")
    k.keyIds.foreach(ids.add(_))
    node.put("rowType", k.rowType.json)
    val ordinals = node.putArray("keyOrdinals")
    k.keyOrdinals.foreach(ordinals.add(_))
    node.put("head", k.head)
    node.put("version", k.version)
    val files = node.putArray("files")
    k.files.foreach { case (i, f) => files.addObject().put("id", i).put("location", f) }
    node.put("live", k.live)
    node.put("removedSincePurge", k.removedSincePurge)
    k.index.stores.save(node)
  }

  /**
   * The newest kept rows of `table` on key `ids` saved under `files` that `snapshot` descends from
   * and whose stores all load and verify, if any: a failure to read them is none.
   */
  private def restore(session: SparkSession, table: Table, id: String, files: StateFiles, ids: Seq[Int],
      snapshot: Snapshot): Option[Kept] = {
    val uuid = table.uuid().toString
    val lineage = Iterator.iterate(Option(snapshot))(_.flatMap(s => Option(s.parentId()).flatMap(p => Option(table.snapshot(p)))))
      .take(1000).takeWhile(_.isDefined).flatten.map(_.snapshotId()).toSet
    RowImageIndex.restoreNewest(session, files, s"kept rows of copy ${table.name()}") { d =>
      d.path("kind").asText() == Kind && d.path("table").asText() == uuid &&
        d.get("keyIds").elements().asScala.map(_.asInt()).toSeq == ids && lineage(d.path("head").asLong())
    } { (index, d) =>
      val k = new Kept(session.sparkContext.applicationId, uuid, index, d.get("schemaId").asInt(), ids,
        DataType.fromJson(d.get("rowType").asText()).asInstanceOf[StructType], d.get("keyOrdinals").elements().asScala.map(_.asInt()).toArray)
      k.head = d.get("head").asLong()
      k.version = d.get("version").asLong()
      d.get("files").elements().asScala.foreach(f => k.files(f.get("id").asInt()) = f.get("location").asText())
      k.live = d.get("live").asLong()
      k.removedSincePurge = d.get("removedSincePurge").asLong()
      k
    } (_.index).map { case (k, version) =>
      kept.put(id, k)
      restores.incrementAndGet()
      logInfo(s"eqdelete: kept rows of copy ${table.name()} restored from version $version in ${files.root}, following snapshot ${k.head}")
      k
    }
  }
}
