package eqdelete.liveindex

import scala.collection.mutable
import scala.jdk.CollectionConverters._

import eqdelete.planning.{EqualityDeleteSet, ScanDeletes}
import eqdelete.resolve.ResolveWork
import eqdelete.scan.{FileSelection, StrippedScan}
import eqdelete.state.{KeptStores, StateFiles, StateLocation, StoreState}

import org.apache.spark.rdd.RDD
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.eqdelete.compat.{EqDeleteConf, IcebergInternals}
import org.apache.spark.sql.types.DataType

/**
 * An index of one table's live rows by the key of one equality set, kept across rounds by a
 * long-running `maintain` and brought forward to each round's snapshot: the data files the
 * round plans that it does not hold are read and indexed, those it holds that the round no longer
 * plans leave use, files whose rows another writer deleted by position since (the snapshots
 * between, [[TableChanges]]) are read again under a new id, and the positions its own rounds
 * resolved are removed when they commit. It is built again
 * from the table when the snapshot it reflects is not an ancestor of the round's, a snapshot
 * between has expired, or its own last commit is not in the round's lineage (rolled back).
 *
 * It is built again too when the key's types change (a promoted column packs its values
 * otherwise). A commit resolving several equality sets' rows removes from each set's index the
 * rows it found; the files where the others' were resolved are read again next round.
 *
 * The driver holds, per data file in use, its id and row count: what grows with files, not
 * rows. Entries of files out of use are purged from the stores once they are as many as the
 * rows of the files in use, so the stores hold at most twice the entries of the files in use,
 * and a purge's pass is paid for by the changes that made it due.
 *
 * Its stores are checkpointed ([[eqdelete.state.KeptStores]]) and its driver state saved with
 * them after each round's steps, so a task runs on any executor, and a restarted `maintain`
 * restores it ([[KeptLiveIndex.restore]]) and brings it forward from the snapshot it reflected,
 * as a round does, instead of building it from the table.
 */
final class KeptLiveIndex private (files: StateFiles, snapshotEvery: Int, private var index: LiveKeyIndex) {
  private var reflects: Option[Long] = None
  private val ids = mutable.HashMap.empty[String, Int]
  private val records = mutable.HashMap.empty[Int, Long]  // rows of each file id in use
  private val outOfUse = mutable.Set.empty[Int]
  private var outOfUseRecords = 0L
  private var nextId = 0
  private var ownCommit: Option[Long] = None
  private var entryCount = 0L
  private var keyTypes: Option[Seq[DataType]] = None
  /** Files another equality set's rows were resolved in by its own last commit: read again next round. */
  private var resolvedByOtherSets = Set.empty[String]

  /** What this round did to the index: built it from the table (why), else None; and the data files its last attempt read. */
  private var lastBuild: Option[String] = None
  private[liveindex] var lastFilesRead: Int = 0
  /** The saved versions newer than the one restored (or all, when it was built) that could not be used, each with why. */
  private[liveindex] var passedOver: Seq[String] = Nil

  /** What this round did to the index (restored, built: why), with the saved versions it passed over. */
  private[liveindex] def news: Option[String] = {
    val passed = if (passedOver.isEmpty) None else Some(s"saved versions passed over: ${passedOver.mkString("; ")}")
    (lastBuild ++ passed).reduceOption(_ + "; " + _)
  }

  /** A round begins (not each of its attempts): what the last one did to the index is no longer news. */
  private[liveindex] def beginRound(): Unit = {
    lastBuild = None; passedOver = Nil; lastFilesRead = 0; roundStart = (index, index.stores.written)
  }

  private var roundStart: (LiveKeyIndex, Long) = (index, 0L)

  /** Bytes written to durable storage since the round began (a build's too). */
  def writtenThisRound: Long = index.stores.written - (if (roundStart._1 eq index) roundStart._2 else 0L)

  /** Bytes the current version takes on durable storage. */
  def storedBytes: Long = index.stores.stored

  /** Entries in the stores (those of files out of use, not purged yet, included). */
  def entries: Long = entryCount

  /** Bytes the stores hold. */
  def bytes(session: SparkSession): Long = index.bytes(session.sparkContext)

  /** The index brought to the work's snapshot (`stores` stores when built); then `set`'s removals found in it, not yet committed. */
  def positions(session: SparkSession, work: ResolveWork, deletes: ScanDeletes, set: EqualityDeleteSet,
      stores: Int): RDD[IndexedDeletedPositions.Found] = {
    val scan = broughtForward(session, work, deletes, set, stores)
    IndexedDeletedPositions.found(session.sparkContext, index, scan, set, IndexedDeletedPositions.files(deletes, ids.toMap))
  }

  /**
   * The index brought to the work's snapshot (`stores` stores when built): the data files it
   * lacks read into it. The scan that read them names the key columns.
   */
  private def broughtForward(session: SparkSession, work: ResolveWork, deletes: ScanDeletes, set: EqualityDeleteSet,
      stores: Int): StrippedScan = {
    val (held, first) = (index, reflects.isEmpty)
    var toRead = filesToRead(session, work, deletes, stores, None)
    // One scan serves both: it reads the files brought in, and names the key columns the lookup packs.
    var scan = IndexedDeletedPositions.strippedScan(session, work, deletes, FileSelection.Only(toRead))
    val types = scan.keyColumns(set).map(_.dataType)
    if (keyTypes.exists(_ != types)) {
      // A promoted key column (float to double, a wider decimal) packs its values differently.
      toRead = filesToRead(session, work, deletes, stores, Some(s"built again from the table: the key's types changed " +
        s"(${keyTypes.get.map(_.simpleString).mkString(", ")} to ${types.map(_.simpleString).mkString(", ")})"))
      scan = IndexedDeletedPositions.strippedScan(session, work, deletes, FileSelection.Only(toRead))
    }
    keyTypes = Some(types)
    if (outOfUse.nonEmpty && outOfUseRecords >= records.values.sum) {
      entryCount -= index.purge(session.sparkContext, outOfUse.toSet)
      outOfUse.clear()
      outOfUseRecords = 0
    }
    if (toRead.nonEmpty) {
      val entries = IndexedDeletedPositions.entries(session, scan, set, ids.filter { case (p, _) => toRead(p) }.toMap)
      // Stores never written (a build): Spark sorts each one's entries and it takes them in as
      // sorted files, past RocksDB's memtables, compactions and the version's delta, which would
      // hold every entry; the version is a snapshot of those files.
      entryCount += (if (index.stores.current.forall(_.version == StoreState.EmptyVersion)) index.load(entries) else index.add(entries))
    }
    reflects = Some(work.snapshotId)
    ownCommit = None
    lastFilesRead = toRead.size
    // A build is saved at once (the round's commit saves the rest): a restart after it never builds again.
    if (first || !(index eq held)) save()
    scan
  }

  /**
   * The files to read to bring the index to the work's snapshot, each given a new id: all of
   * them when it is built (again), as it is when `rebuild` says why.
   */
  private def filesToRead(session: SparkSession, work: ResolveWork, deletes: ScanDeletes, stores: Int,
      rebuild: Option[String]): Set[String] = {
    val table = work.table
    val planned = deletes.scan.tasks.map(t => t.file().location() -> t.file().recordCount()).toMap
    val (changes, stale) = staleness(work, stores)
    val build = rebuild.orElse(stale)
    // A round's later attempt (after a conflict) keeps the news of a build in an earlier one.
    lastBuild = build.orElse(lastBuild)
    val toRead = changes match {
      case Some(c) if build.isEmpty =>
        val known = ids.keySet.toSet
        val deletedByOthers = c.positionDeletes.flatMap(IcebergInternals.positionDeleteTargets(table.io(), _)).toSet ++
          resolvedByOtherSets
        val reread = deletedByOthers intersect known intersect planned.keySet
        retire(known -- planned.keySet ++ reread)
        (planned.keySet -- known) ++ reread
      case _ =>
        if (ids.nonEmpty || outOfUse.nonEmpty || index.partitions != stores) rebuilt(session, stores)
        planned.keySet
    }
    resolvedByOtherSets = Set.empty
    toRead.foreach { p => ids(p) = nextId; records(nextId) = planned(p); nextId += 1 }
    toRead
  }

  /**
   * Why the index must be built again before it reflects the work's snapshot (None: it can be
   * brought forward), with the table's changes since the snapshot it reflects, when they can be walked.
   */
  private def staleness(work: ResolveWork, stores: Int): (Option[TableChanges], Option[String]) = {
    // A round asks twice (its choice, then bringing the index forward): the walk of the
    // snapshots' delete manifests is made once for what it depends on.
    val of = (reflects, ownCommit, work.snapshotId)
    val changes = walked.filter(_._1 == of).map(_._2).getOrElse {
      val walk = reflects.flatMap(from =>
        TableChanges.between(work.table, from, work.snapshotId, s => ownCommit.contains(s.snapshotId())))
      walked = Some(of -> walk)
      walk
    }
    val why = (reflects, changes) match {
      case (None, _) => Some("built from the table: its first round here")
      case _ if index.partitions != stores =>
        Some(s"built again from the table: $stores stores asked for, not ${index.partitions}")
      case (Some(from), None) => Some(s"built again from the table: snapshot $from it reflected is not an ancestor of " +
        s"${work.snapshotId}, or one between has expired")
      case (_, Some(c)) if ownCommit.exists(own => !c.snapshots.contains(own)) =>
        Some(s"built again from the table: its own commit ${ownCommit.get} is no longer in the table's lineage (rolled back)")
      case _ => None
    }
    (changes, why)
  }

  /** The last walk of the table's changes: from what it reflected and its own commit to which snapshot, and what it found. */
  private var walked: Option[((Option[Long], Option[Long], Long), Option[TableChanges])] = None

  /** Whether the index can be brought to the work's snapshot without being built again. */
  def current(work: ResolveWork, stores: Int): Boolean = staleness(work, stores)._2.isEmpty

  /** The files leave use: their entries are dead (lookups skip them) until purged. */
  private def retire(files: Set[String]): Unit = files.foreach { p =>
    ids.remove(p).foreach { id =>
      outOfUse += id
      outOfUseRecords += records.remove(id).getOrElse(0L)
    }
  }

  /** Fresh, empty stores in place of the old (dropped whole: cheaper than purging every entry). */
  private def rebuilt(session: SparkSession, stores: Int): Unit = {
    index.drop(session.sparkContext)
    index = LiveKeyIndex.create(files, stores, snapshotEvery)
    ids.clear(); records.clear(); outOfUse.clear()
    outOfUseRecords = 0
    entryCount = 0
  }

  /**
   * After the round's commit, snapshot `committed`: the entries it resolved leave the index; the
   * data files where other equality sets' rows were resolved by the same commit (`byOtherSets`)
   * are read again next round, for this index cannot find those rows by their other key.
   * `resolved` is the entries its lookup found, partition for partition ([[LiveKeyIndex.removeFound]]).
   */
  def committed(committed: Long, resolved: RDD[LiveKeyEntry], byOtherSets: Set[String]): Unit = {
    resolvedByOtherSets = byOtherSets
    // Two delete rows of one key find its entry twice: removed once, so the count stays exact.
    entryCount -= index.removeFound(resolved)
    ownCommit = Some(committed)
    save()
  }

  /** Drops the index: its stores and their checkpoints. */
  def drop(session: SparkSession): Unit = index.drop(session.sparkContext)

  /** Drops the index and every saved version of its table's indexes of its key, its own and others': none is restored. */
  def dropAll(session: SparkSession): Unit = { drop(session); files.deleteAll() }

  /**
   * Drops the executors' copies of the stores, their checkpoints kept: a task loads its store
   * again, and a driver that lets go of the index restores it from its last saved version.
   */
  def release(session: SparkSession): Unit = index.stores.release(session.sparkContext)

  /** Bytes its steps and saves wrote to durable storage. */
  def bytesWritten: Long = index.stores.written

  /** Saves the index's version with the driver's state of it, so a restart restores it. */
  private def save(): Unit = {
    val node = KeptLiveIndex.Mapper.createObjectNode()
    node.put("kind", KeptLiveIndex.Kind)
    reflects.foreach(node.put("reflects", _))
    ownCommit.foreach(node.put("ownCommit", _))
    node.put("nextId", nextId)
    node.put("entryCount", entryCount)
    node.put("outOfUseRecords", outOfUseRecords)
    val files = node.putArray("files")
    ids.foreach { case (path, id) => files.addObject().put("path", path).put("id", id).put("records", records(id)) }
    val gone = node.putArray("outOfUse")
    outOfUse.foreach(gone.add(_))
    val others = node.putArray("resolvedByOtherSets")
    resolvedByOtherSets.foreach(others.add)
    keyTypes.foreach(types => node.put("keyTypes", org.apache.spark.sql.types.StructType(
      types.zipWithIndex.map { case (t, i) => org.apache.spark.sql.types.StructField(s"k$i", t) }).json))
    index.stores.save(node)
  }
}

object KeptLiveIndex {
  private val Mapper = new com.fasterxml.jackson.databind.ObjectMapper()
  private val Kind = "live-index"

  /** Where the kept indexes of `table`'s equality set `equalityIds` are checkpointed. */
  def files(session: SparkSession, table: org.apache.iceberg.Table, equalityIds: Seq[Int]): StateFiles =
    allFiles(session, table).under(equalityIds.mkString("-"))

  /** Where every kept index of `table` is checkpointed. */
  def allFiles(session: SparkSession, table: org.apache.iceberg.Table): StateFiles = StateLocation.of(session, table).under(Kind)

  def create(session: SparkSession, files: StateFiles, partitions: Int): KeptLiveIndex = {
    val every = EqDeleteConf.stateDeltasPerSnapshot(session.sessionState.conf)
    new KeptLiveIndex(files, every, LiveKeyIndex.create(files, partitions, every))
  }

  /**
   * The newest index saved under `files` (by this driver before a restart, or by another) whose
   * stores all load and verify, at the version it saved ([[KeptStores.newestLoadable]]): a round
   * then brings it forward from the snapshot it reflected (or builds it again, if that snapshot is
   * not an ancestor of the round's). Left: why each saved version was passed over (none saved: empty).
   */
  def restore(session: SparkSession, files: StateFiles): Either[Seq[String], KeptLiveIndex] = {
    val every = EqDeleteConf.stateDeltasPerSnapshot(session.sessionState.conf)
    KeptStores.newestLoadable(files)(m => Option(m.driver).exists(_.path("kind").asText() == Kind))(
      m => fromManifest(files, every, m))(_.index.stores.unloadable(session.sparkContext), _.release(session)).map { r =>
      r.index.lastBuild = Some(s"restored from version ${r.manifest.version} saved at ${new java.util.Date(r.manifest.savedAt)} " +
        s"in ${files.root}")
      r.index.passedOver = r.passedOver
      r.index
    }
  }

  /** The index a saved manifest describes, with the driver's state of it (its stores load when first used). */
  private def fromManifest(files: StateFiles, every: Int, m: KeptStores.Manifest): KeptLiveIndex = {
    val d = m.driver
    val kept = new KeptLiveIndex(files, every, LiveKeyIndex.restored(files, m, every))
    if (d.has("reflects")) kept.reflects = Some(d.get("reflects").asLong())
    if (d.has("ownCommit")) kept.ownCommit = Some(d.get("ownCommit").asLong())
    kept.nextId = d.get("nextId").asInt()
    kept.entryCount = d.get("entryCount").asLong()
    kept.outOfUseRecords = d.get("outOfUseRecords").asLong()
    d.get("files").elements().asScala.foreach { f =>
      kept.ids(f.get("path").asText()) = f.get("id").asInt()
      kept.records(f.get("id").asInt()) = f.get("records").asLong()
    }
    d.get("outOfUse").elements().asScala.foreach(n => kept.outOfUse += n.asInt())
    kept.resolvedByOtherSets = d.get("resolvedByOtherSets").elements().asScala.map(_.asText()).toSet
    if (d.has("keyTypes")) {
      kept.keyTypes = Some(org.apache.spark.sql.types.DataType.fromJson(d.get("keyTypes").asText())
        .asInstanceOf[org.apache.spark.sql.types.StructType].fields.map(_.dataType).toSeq)
    }
    kept
  }
}
