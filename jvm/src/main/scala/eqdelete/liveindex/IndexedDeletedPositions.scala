package eqdelete.liveindex

import scala.jdk.CollectionConverters._

import eqdelete.cost.Strategy
import eqdelete.deleteindex.KeyBytes
import eqdelete.explain.Decision
import eqdelete.planning.{EqualityDeleteSet, ScanDeletes}
import eqdelete.read.DeleteRows
import eqdelete.resolve.{DeletedPositions, ResolveEqualityDeletes, ResolveWork}
import eqdelete.scan.{FileSelectingTable, FileSelection, IcebergViews, StrippedScan}
import eqdelete.state.StateLocation

import org.apache.spark.SparkContext
import org.apache.spark.rdd.RDD
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Alias, Expression}
import org.apache.spark.sql.catalyst.plans.logical.Project
import org.apache.spark.sql.eqdelete.compat.SparkShim
import org.apache.spark.sql.types.DataType
import org.apache.spark.unsafe.types.UTF8String

/**
 * The positions [[DeletedPositions]] finds, found instead through an index of the live rows by
 * key ([[LiveKeyIndex]]), one per equality delete set: every planned data file's rows (equality
 * deletes stripped, position deletes and deletion vectors applied, as [[DeletedPositions]] reads
 * them) are its entries, and each delete row's key is looked up in it; an entry found is
 * deleted when the delete is newer than its file and of its file's partition, or global, the
 * join's own rule. [[of]] builds an index from the snapshot for one call (the differential
 * test compares it with [[DeletedPositions]]); [[KeptLiveIndex]] keeps one across the rounds of
 * a long-running `maintain`, with the same reads and lookups.
 */
object IndexedDeletedPositions {

  /** Every `(data file, position)` the work's equality deletes remove, each once; `partitions` stores per index. */
  def of(session: SparkSession, work: ResolveWork, deletes: ScanDeletes, partitions: Int): RDD[(String, Long)] = {
    val sc = session.sparkContext
    val scan = strippedScan(session, work, deletes, FileSelection.AllEqualityDeletesRemoved)
    val paths = deletes.scan.tasks.map(_.file().location()).distinct
    val ids = paths.zipWithIndex.toMap
    val positions = deletes.deleteSets.map { set =>
      val index = LiveKeyIndex.create(StateLocation.of(session, work.table).under(s"live-index-once/${java.util.UUID.randomUUID()}"),
        partitions, snapshotEvery = Int.MaxValue)
      try {
        index.load(entries(session, scan, set, ids))
        found(sc, index, scan, set, files(deletes, ids)).map(f => (f.path, f.position)).collect().toSeq  // before the drop
      } finally index.drop(sc)
    }
    sc.parallelize(positions.flatten.distinct, math.max(1, partitions))
  }

  /** A row `found`: its key's entry in the index, and its data file. */
  final case class Found(entry: LiveKeyEntry, path: String, position: Long)

  /**
   * By id, each indexed data file's location, data sequence number and scope, from the planning
   * of `deletes`; null for an id no longer in use (a file gone, or read again under a new id).
   */
  private[liveindex] def files(deletes: ScanDeletes, ids: Map[String, Int]): Array[(String, Long, Long)] = {
    val byId = new Array[(String, Long, Long)](if (ids.isEmpty) 0 else ids.values.max + 1)
    ids.foreach { case (p, id) =>
      val path = UTF8String.fromString(p)
      byId(id) = (p, deletes.dataFileScopes.sequenceNumber(path), deletes.dataFileScopes.scope(path))
    }
    byId
  }

  /**
   * The live rows `set`'s delete rows remove, looked up in `index`: a delete row removes an
   * entry of its key whose file is in use, older than the delete, and of its scope (or any, for
   * a global delete), the join's own rule.
   */
  private[liveindex] def found(sc: SparkContext, index: LiveKeyIndex, scan: StrippedScan, set: EqualityDeleteSet,
      byId: Array[(String, Long, Long)]): RDD[Found] = {
    val files = sc.broadcast(byId)
    val deleteKeys = set.keyPaths.size
    val keyTypes = scan.keyColumns(set).map(_.dataType).toArray
    val rows = DeleteRows.rdd(sc, scan.reader(set), set.files, math.max(1, set.files.size), set.describeKeys)
      .map { row => val key = packed(row, keyTypes); (key, (key, row.getLong(deleteKeys), row.getLong(deleteKeys + 1))) }
    index.lookup(rows).flatMap { case ((key, deleteScope, deleteSeq), file, position) =>
      val meta = if (file < files.value.length) files.value(file) else null
      if (meta != null && meta._2 < deleteSeq && (deleteScope == ScanDeletes.GlobalScope || deleteScope == meta._3)) {
        Some(Found(LiveKeyEntry(key, file, position), meta._1, position))
      } else None
    }
  }

  /** The read [[DeletedPositions]] makes, over the planned data files `selection` selects. */
  private[liveindex] def strippedScan(session: SparkSession, work: ResolveWork, deletes: ScanDeletes,
      selection: FileSelection): StrippedScan = {
    val target = work.target
    val decision = Decision.of(target.table.name(), work.snapshotId, Strategy.Join, "indexing the live rows by key",
      "an index of the live rows by key", Some(deletes))
    val view = IcebergViews.sameView(target.relation.table, target.snapshotId,
      FileSelectingTable(target.table, selection, decision, Some(deletes.scan)))
    StrippedScan.of(target.relation, view, needed = Nil, target.conditions, deletes, target.table, deletes.scan.readSchema,
      metadata = Seq("_file", "_pos"), detached = true)._1
  }

  /** The live rows the scan reads, as entries of `set`'s key, each file under its id in `ids`. */
  private[liveindex] def entries(session: SparkSession, scan: StrippedScan, set: EqualityDeleteSet, ids: Map[String, Int]): RDD[LiveKeyEntry] = {
    val keys: Seq[Expression] = scan.keyColumns(set)
    val keyTypes = keys.map(_.dataType).toArray
    val n = keys.size
    val plan = Project(keys.zipWithIndex.map { case (k, i) => Alias(k, s"_eqdelete_key_$i")() } ++ scan.columns, scan.source)
    val idsOf = session.sparkContext.broadcast(ids)
    SparkShim.dataFrame(session, plan).queryExecution.toRdd.map { row =>
      LiveKeyEntry(packed(row, keyTypes), idsOf.value(row.getUTF8String(n).toString), row.getLong(n + 1))
    }
  }

  /** The first `types.length` columns of `row` as a key's packed bytes. */
  private def packed(row: InternalRow, types: Array[DataType]): Array[Byte] = KeyBytes.packed(row, types.indices.toArray, types)

  /** For the differential test: the positions both ways, as `(path, position)` pairs, today's plan first. */
  def bothWays(session: SparkSession, tableName: String): (java.util.List[String], java.util.List[String]) = {
    val work = ResolveEqualityDeletes.workFor(session, tableName, null)
    def described(positions: Iterable[(String, Long)]) = positions.map { case (f, p) => s"$f#$p" }.toSeq.sorted.asJava
    work.deletes match {
      case None => (java.util.Collections.emptyList(), java.util.Collections.emptyList())
      case Some(deletes) =>
        val today = DeletedPositions.of(session, work, deletes).collect().map(r => (r.getString(0), r.getLong(1))).distinct
        val indexed = of(session, work, deletes, partitions = 3).collect()
        (described(today), described(indexed))
    }
  }
}
