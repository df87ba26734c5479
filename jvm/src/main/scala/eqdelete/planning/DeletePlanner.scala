package eqdelete.planning

import scala.collection.mutable
import scala.jdk.CollectionConverters._
import scala.util.Using

import org.apache.iceberg.metrics.MetricsReport
import org.apache.iceberg.{ContentFile, DeleteFile, FileContent, FileScanTask, PartitionSpec, Schema, Table}
import org.apache.iceberg.expressions.{Expression => IcebergExpression, Expressions}
import org.apache.iceberg.types.{Type, TypeUtil}

/** Why a scan is left to Iceberg; carried into EXPLAIN and the decision records. */
final case class DeclinedException(reason: String) extends Exception(reason)

/**
 * Plans one Iceberg scan the way Iceberg does (same snapshot, same filter) and turns its
 * per-file delete assignment into a [[ScanDeletes]], keeping the planned tasks so the rewritten
 * scans read them instead of planning again; returns None when no planned file carries
 * equality deletes. Throws [[DeclinedException]] when the rewrite cannot be exact.
 */
object DeletePlanner {

  /** Every primitive type an equality key may have that Spark reads (it has no TIME, no nanosecond timestamps). */
  private val supportedKeyTypes = Set(
    Type.TypeID.BOOLEAN, Type.TypeID.INTEGER, Type.TypeID.LONG, Type.TypeID.FLOAT, Type.TypeID.DOUBLE,
    Type.TypeID.DECIMAL, Type.TypeID.DATE, Type.TypeID.TIMESTAMP, Type.TypeID.STRING, Type.TypeID.UUID,
    Type.TypeID.FIXED, Type.TypeID.BINARY)

  def plan(
      table: Table,
      snapshotId: Long,
      readSchema: Schema,
      filter: IcebergExpression = Expressions.alwaysTrue(),
      caseSensitive: Boolean = false,
      onlyFiles: Option[Set[String]] = None): Option[ScanDeletes] =
    planned(table, snapshotId, readSchema, filter, caseSensitive, onlyFiles)._2

  /**
   * The scan's tasks, and its deletes as [[plan]] gives them. A read of files the snapshot itself
   * added (the changes' reads of a commit's inserts) is planned from that snapshot's manifests
   * alone (AddedFileTasks): no equality delete applies to such files.
   */
  def planned(
      table: Table,
      snapshotId: Long,
      readSchema: Schema,
      filter: IcebergExpression = Expressions.alwaysTrue(),
      caseSensitive: Boolean = false,
      onlyFiles: Option[Set[String]] = None): (PlannedTasks, Option[ScanDeletes]) =
    onlyFiles.flatMap(AddedFileTasks.of(table, snapshotId, _, filter, caseSensitive)) match {
      case Some(tasks) => (PlannedTasks(snapshotId, readSchema, filter, caseSensitive, tasks, Nil, onlyFiles), None)
      case None => planWhole(table, snapshotId, readSchema, filter, caseSensitive, onlyFiles)
    }

  private def planWhole(table: Table, snapshotId: Long, readSchema: Schema, filter: IcebergExpression, caseSensitive: Boolean,
      onlyFiles: Option[Set[String]]): (PlannedTasks, Option[ScanDeletes]) = {
    val scopes = new ScopeIds
    val files = mutable.HashMap.empty[String, (Long, Int)]
    var withDeletes = 0
    var rowsWithDeletes, rowsWithoutDeletes = 0L
    val deletesByPath = mutable.LinkedHashMap.empty[String, EqualityDeleteRef]
    val planned = Vector.newBuilder[FileScanTask]

    // Float and double columns keep their NaN counts in the planned files: see `overlookedDeletes`.
    val floating = TypeUtil.indexById(readSchema.asStruct()).asScala.collect {
      case (id, f) if f.`type`().typeId() == Type.TypeID.FLOAT || f.`type`().typeId() == Type.TypeID.DOUBLE => id.intValue
    }.toVector
    // uuid columns: see `overlookedDeletes`.
    val uuids = KnownMisreads.uuidFields(readSchema)
    // Iceberg's report of this planning (it reaches the table's own reporter too), for the scans served its tasks.
    val reports = new java.util.concurrent.CopyOnWriteArrayList[MetricsReport]()
    val unfiltered = table.newScan().useSnapshot(snapshotId).caseSensitive(caseSensitive).filter(filter)
      .metricsReporter((report: MetricsReport) => { reports.add(report); () })
    val scan = if (floating.isEmpty) unfiltered else unfiltered.includeColumnStats(floating.map(readSchema.findColumnName).asJava)
    var dataMayHoldNaN = false
    Using.resource(scan.planFiles()) { tasks =>
      // A read restricted to named files (ScanFilters.fileRestriction) plans, and reads, only those.
      tasks.asScala.filter(task => onlyFiles.forall(_.contains(task.file().location()))).foreach { task =>
        planned += task
        if (floating.nonEmpty && !dataMayHoldNaN) dataMayHoldNaN = mayHoldNaN(task.file(), floating)
        val eqDeletes = task.deletes().asScala.filter(_.content() == FileContent.EQUALITY_DELETES)
        val data = task.file()
        val dataSeq: Long = data.dataSequenceNumber()
        val dataScope = scopes.of(task.spec(), data)
        // Splits of one file share its entry; rows are counted once per file.
        val firstSplit = !files.contains(data.location())
        files.update(data.location(), (dataSeq, dataScope))
        if (eqDeletes.isEmpty) {
          if (firstSplit) rowsWithoutDeletes += data.recordCount()
        } else {
          if (firstSplit) { withDeletes += 1; rowsWithDeletes += data.recordCount() }
          eqDeletes.foreach { delete =>
            val ref = deletesByPath.getOrElseUpdate(delete.location(), {
              val spec = table.specs().get(delete.specId())
              val scope = if (spec.isUnpartitioned) ScanDeletes.GlobalScope else scopes.of(spec, delete)
              EqualityDeleteRef(delete, scope, delete.dataSequenceNumber())
            })
            checkIcebergAgrees(task, ref, dataSeq, dataScope)
          }
        }
      }
    }
    // Deletes Iceberg may have left out of every task (see `overlookedDeletes`), applied by the rule
    // instead: those that can apply to a planned file, newer than one of its scope (of any, if global).
    val oldestByScope = files.values.groupBy(_._2).map { case (scope, of) => scope -> of.map(_._1).min }
    val oldest = if (oldestByScope.isEmpty) Long.MaxValue else oldestByScope.values.min
    val overlooked = overlookedDeletes(table, snapshotId, readSchema, dataMayHoldNaN, uuids)
      .filterNot(d => deletesByPath.contains(d.location()))
      .map { delete =>
        val spec = table.specs().get(delete.specId())
        EqualityDeleteRef(delete, if (spec.isUnpartitioned) ScanDeletes.GlobalScope else scopes.of(spec, delete),
          delete.dataSequenceNumber())
      }.filter(ref => ref.sequenceNumber > (if (ref.isGlobal) oldest else oldestByScope.getOrElse(ref.scope, Long.MaxValue)))
    overlooked.foreach(ref => deletesByPath.update(ref.file.location(), ref))
    val scanned = PlannedTasks(snapshotId, readSchema, filter, caseSensitive, planned.result(), reports.asScala.toVector,
      onlyFiles)
    if (withDeletes == 0 && overlooked.isEmpty) return (scanned, None)

    val sets = deletesByPath.values.toVector.groupBy(_.file.equalityFieldIds().asScala.map(_.intValue).toVector)
    val deleteSets = sets.toVector.sortBy(_._1.mkString(",")).map { case (ids, refs) =>
      EqualityDeleteSet(ids, ids.map(keyPath(readSchema, _)), refs, KeyTypeHistory.promotedKeys(table, ids))
    }
    (scanned, Some(ScanDeletes(snapshotId, new DataFileScopes(files.toMap), withDeletes, rowsWithDeletes, rowsWithoutDeletes, deleteSets,
      scanned, deleteSets.find(set => set.files.exists(ref => mayHoldNaN(ref.file, readSchema))).map { set =>
        s"delete files on ${set.describeKeys} may hold NaN, which Iceberg's pairing of delete and data files by " +
          "their bounds overlooks"
      }.orElse(deleteSets.find(_.equalityIds.exists(uuids.contains)).map(set => KnownMisreads.uuidKey(set.describeKeys))))))
  }

  /**
   * The snapshot's live equality delete files Iceberg's pairing may have left out of a task, from
   * its delete manifests (metadata only, read only when one of these can occur):
   *  - those that may hold NaN keys, when a planned data file may hold NaN (see `mayHoldNaN`);
   *  - every one on a `uuid` key (`uuids`, the read schema's uuid columns). Parquet orders a UUID by
   *    its unsigned bytes and writes every file's bounds so; Iceberg compares them as
   *    `java.util.UUID`s, signed (Iceberg #14216). A data file whose keys straddle `0x80…` then
   *    looks disjoint from a delete file whose keys it holds, and `DeleteFileIndex` leaves the
   *    delete out of its task.
   */
  private def overlookedDeletes(table: Table, snapshotId: Long, readSchema: Schema, dataMayHoldNaN: Boolean,
      uuids: Set[Int]): Seq[DeleteFile] = {
    if (!dataMayHoldNaN && (uuids.isEmpty || !LiveDeleteFiles.mayHoldEqualityDeletes(table, snapshotId))) return Nil
    LiveDeleteFiles.equalityDeletes(table, snapshotId).filter { delete =>
      (dataMayHoldNaN && mayHoldNaN(delete, readSchema)) || delete.equalityFieldIds().asScala.exists(id => uuids(id.intValue))
    }
  }

  /**
   * Iceberg pairs an equality delete file with a data file only when their key bounds overlap,
   * and bounds leave NaN out (`DeleteFileIndex.canContainEqDeletesForFile`): a NaN key is then
   * not applied to a data file whose other values lie outside the delete file's. Whether `file`
   * has a float or double key that may hold NaN (its NaN count says so, or is missing).
   */
  private def mayHoldNaN(file: DeleteFile, readSchema: Schema): Boolean =
    mayHoldNaN(file, file.equalityFieldIds().asScala.map(_.intValue).filter { id =>
      Option(readSchema.findType(id)).exists(t => t.typeId() == Type.TypeID.FLOAT || t.typeId() == Type.TypeID.DOUBLE)
    }.toVector)

  /** Whether `file` may hold NaN in one of the `floating` columns: its NaN count says so, or is missing. */
  private def mayHoldNaN(file: ContentFile[_], floating: Seq[Int]): Boolean = {
    val counts = file.nanValueCounts()
    floating.exists { id =>
      val count = if (counts == null) null else counts.get(Integer.valueOf(id))
      count == null || count.longValue() > 0
    }
  }

  /** The rewrite's rule must cover every delete Iceberg assigned, or it could resurrect rows. */
  private def checkIcebergAgrees(task: FileScanTask, ref: EqualityDeleteRef, dataSeq: Long, dataScope: Int): Unit = {
    val scopeOk = ref.isGlobal || ref.scope == dataScope
    if (!scopeOk || !(dataSeq < ref.sequenceNumber)) {
      throw DeclinedException(s"Iceberg applies ${ref.file.location()} to ${task.file().location()} " +
        s"outside the sequence-number and partition rule (data seq $dataSeq, delete seq " +
        s"${ref.sequenceNumber}, scopes $dataScope/${ref.scope})")
    }
  }

  /** The key's path of names, from a top-level column down through structs (never lists or maps). */
  private def keyPath(schema: Schema, fieldId: Int): Seq[String] = {
    val field = schema.findField(fieldId)
    if (field == null) {
      throw DeclinedException(s"equality field id $fieldId is not a column of the schema read")
    }
    val name = schema.findColumnName(fieldId)
    if (!supportedKeyTypes.contains(field.`type`().typeId())) {
      throw DeclinedException(s"equality column '$name' has type ${field.`type`()}, which eqdelete does not rewrite")
    }
    val parents = TypeUtil.indexParents(schema.asStruct())
    val ancestors = Iterator.iterate(parents.get(fieldId))(id => parents.get(id)).takeWhile(_ != null).map(_.intValue).toList
    ancestors.find(id => !schema.findType(id).isStructType).foreach { id =>
      throw DeclinedException(s"equality column '$name' is inside ${schema.findType(id).typeId()} " +
        s"'${schema.findColumnName(id)}'; Iceberg allows equality fields in structs only")
    }
    (ancestors.reverse :+ fieldId).map(id => schema.findField(id).name())
  }

  /** A file's (spec id, partition tuple), its values normalised so that equal partitions compare equal. */
  def partitionOf(spec: PartitionSpec, file: ContentFile[_]): (Int, Seq[Any]) = {
    val partition = file.partition()
    spec.specId() -> (0 until spec.fields().size()).map { i =>
      partition.get(i, classOf[Object]) match {
        case chars: CharSequence => chars.toString
        case other => other
      }
    }
  }

  /** Dense ids for (spec, partition tuple): equal tuples share one id. */
  private final class ScopeIds {
    private val ids = mutable.HashMap.empty[(Int, Seq[Any]), Int]

    def of(spec: PartitionSpec, file: ContentFile[_]): Int = ids.getOrElseUpdate(partitionOf(spec, file), ids.size)
  }
}
