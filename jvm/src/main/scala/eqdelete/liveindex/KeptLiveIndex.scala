package eqdelete.liveindex

import scala.collection.mutable

import eqdelete.planning.{EqualityDeleteSet, ScanDeletes}
import eqdelete.resolve.ResolveWork
import eqdelete.scan.{FileSelection, StrippedScan}

import org.apache.spark.rdd.RDD
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.eqdelete.compat.IcebergInternals
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
 */
final class KeptLiveIndex private (private var index: LiveKeyIndex) {
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
  private[liveindex] var lastBuild: Option[String] = None
  private[liveindex] var lastFilesRead: Int = 0

  /** A round begins (not each of its attempts): what the last one did to the index is no longer news. */
  private[liveindex] def beginRound(): Unit = { lastBuild = None; lastFilesRead = 0 }

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
    if (toRead.nonEmpty) entryCount += index.add(IndexedDeletedPositions.entries(session, scan, set, ids.filter { case (p, _) => toRead(p) }.toMap))
    reflects = Some(work.snapshotId)
    ownCommit = None
    lastFilesRead = toRead.size
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
    index = LiveKeyIndex.create(session.sparkContext, stores)
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
  }

  def drop(session: SparkSession): Unit = index.drop(session.sparkContext)
}

object KeptLiveIndex {
  def create(session: SparkSession, partitions: Int): KeptLiveIndex =
    new KeptLiveIndex(LiveKeyIndex.create(session.sparkContext, partitions))
}
