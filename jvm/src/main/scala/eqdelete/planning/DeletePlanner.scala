package eqdelete.planning

import scala.collection.mutable
import scala.jdk.CollectionConverters._
import scala.util.Using

import org.apache.iceberg.{ContentFile, FileContent, FileScanTask, PartitionSpec, Schema, Table}
import org.apache.iceberg.expressions.{Expression => IcebergExpression, Expressions}
import org.apache.iceberg.types.Type

/** Why a scan is left to Iceberg; carried into EXPLAIN and the decision records. */
final case class DeclinedException(reason: String) extends Exception(reason)

/**
 * Plans one Iceberg scan the way Iceberg does (same snapshot, same filter) and turns its
 * per-file delete assignment into a [[DeletePlan]], keeping the planned tasks so the rewritten
 * scans read them instead of planning again; returns None when no planned file carries
 * equality deletes. Throws [[DeclinedException]] when the rewrite cannot be exact.
 */
object DeletePlanner {

  private val supportedKeyTypes = Set(
    Type.TypeID.BOOLEAN, Type.TypeID.INTEGER, Type.TypeID.LONG, Type.TypeID.STRING,
    Type.TypeID.DATE, Type.TypeID.TIMESTAMP, Type.TypeID.DECIMAL, Type.TypeID.BINARY)

  def plan(
      table: Table,
      snapshotId: Long,
      readSchema: Schema,
      filter: IcebergExpression = Expressions.alwaysTrue(),
      caseSensitive: Boolean = false): Option[DeletePlan] = {
    val scopes = new ScopeIds
    val files = mutable.HashMap.empty[String, (Long, Int)]
    var withDeletes = 0
    var rowsWithDeletes, rowsWithoutDeletes = 0L
    val deletesByPath = mutable.LinkedHashMap.empty[String, EqualityDeleteRef]
    val planned = Vector.newBuilder[FileScanTask]

    val scan = table.newScan().useSnapshot(snapshotId).caseSensitive(caseSensitive).filter(filter)
    Using.resource(scan.planFiles()) { tasks =>
      tasks.asScala.foreach { task =>
        planned += task
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
              val scope = if (spec.isUnpartitioned) DeletePlan.GlobalScope else scopes.of(spec, delete)
              EqualityDeleteRef(delete, scope, delete.dataSequenceNumber())
            })
            checkIcebergAgrees(task, ref, dataSeq, dataScope)
          }
        }
      }
    }
    if (withDeletes == 0) return None

    val sets = deletesByPath.values.toVector.groupBy(_.file.equalityFieldIds().asScala.map(_.intValue).toVector)
    val deleteSets = sets.toVector.sortBy(_._1.mkString(",")).map { case (ids, refs) =>
      EqualityDeleteSet(ids, ids.map(keyColumn(readSchema, _)), refs)
    }
    val scanned = PlannedScan(snapshotId, readSchema, filter, caseSensitive, planned.result())
    Some(DeletePlan(snapshotId, new DataFileIndex(files.toMap), withDeletes, rowsWithDeletes, rowsWithoutDeletes, deleteSets,
      scanned))
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

  private def keyColumn(schema: Schema, fieldId: Int): String = {
    val field = schema.findField(fieldId)
    if (field == null) {
      throw DeclinedException(s"equality field id $fieldId is not a column of the schema read")
    }
    if (!supportedKeyTypes.contains(field.`type`().typeId())) {
      throw DeclinedException(s"equality column '${field.name}' has type ${field.`type`()}, which eqdelete does not rewrite")
    }
    if (schema.findColumnName(fieldId) != field.name) {
      throw DeclinedException(s"equality column '${schema.findColumnName(fieldId)}' is nested")
    }
    field.name
  }

  /** Dense ids for (spec, partition tuple); values normalised so equal tuples share one id. */
  private final class ScopeIds {
    private val ids = mutable.HashMap.empty[(Int, Seq[Any]), Int]

    def of(spec: PartitionSpec, file: ContentFile[_]): Int = {
      val partition = file.partition()
      val values = (0 until spec.fields().size()).map { i =>
        partition.get(i, classOf[Object]) match {
          case chars: CharSequence => chars.toString
          case other => other
        }
      }
      ids.getOrElseUpdate((spec.specId(), values), ids.size)
    }
  }
}
