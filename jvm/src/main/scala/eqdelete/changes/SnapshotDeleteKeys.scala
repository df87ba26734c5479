package eqdelete.changes

import scala.jdk.CollectionConverters._

import eqdelete.deleteindex.KeyBytes
import eqdelete.join.{DeleteRowsRelation, JoinMetrics}
import eqdelete.planning.{EqualityDeleteRef, ScanDeletes}
import eqdelete.read.{DeleteRowReader, DeleteRows}

import org.apache.iceberg.{Schema, Table}
import org.apache.iceberg.types.{Type, Types}
import org.apache.spark.sql.{Column, DataFrame, SparkSession}
import org.apache.spark.sql.catalyst.expressions.AttributeReference
import org.apache.spark.sql.catalyst.plans.logical.Statistics
import org.apache.spark.sql.eqdelete.compat.SparkShim
import org.apache.spark.sql.types.LongType

/**
 * A snapshot's deleted rows looked for among few rows. When only its equality deletes on one set
 * of key columns change the rows of the parent's files it touched (`SnapshotWork.byKeys`), every
 * row it deletes there has the key of one of its delete rows. So the reads of those files keep
 * only such rows ([[candidates]]), by a semi-join with the snapshot's delete rows, read by Spark
 * tasks and broadcast when small (as the join strategy's delete side is): then no shuffle carries
 * the table.
 *
 * Spark's join equality can be coarser than Iceberg's (it makes -0.0 and 0.0, and every NaN,
 * equal), and the semi-join ignores the deletes' partitions. So in general it only narrows:
 * which candidates the snapshot deleted is still decided by the two reads (at the parent, at the
 * snapshot), through the rule, by position. When it is [[exact]] (every delete global, or partitioned
 * by functions of its keys in the one spec of the parent's files; every key
 * a top-level column of a type Spark compares as Iceberg does), the candidates live in the parent
 * are the deleted rows, and the read at the snapshot is not needed.
 *
 * @param exact  whether the parent's candidates are exactly the rows the snapshot deleted
 */
final class SnapshotDeleteKeys private (val equalityIds: Seq[Int], currentSchema: Schema, val deleteKeys: DataFrame,
    val nullSafe: Boolean, val exact: Boolean) {

  /** The rows of `rows` (a read of the touched files in `schema`) whose key is one of the snapshot's delete rows'. */
  def candidates(schema: Schema, rows: DataFrame): DataFrame =
    rows.join(deleteKeys, SnapshotDeleteKeys.matches(rows, schema, equalityIds, currentSchema, deleteKeys, nullSafe), "left_semi")
}

object SnapshotDeleteKeys {
  /** Key types whose values Spark's equality compares as Iceberg's does (no floating point). */
  private val ExactTypes = Set(Type.TypeID.BOOLEAN, Type.TypeID.INTEGER, Type.TypeID.LONG, Type.TypeID.DATE,
    Type.TypeID.TIMESTAMP, Type.TypeID.STRING, Type.TypeID.UUID, Type.TypeID.FIXED, Type.TypeID.BINARY, Type.TypeID.DECIMAL)

  /**
   * The delete keys of `work` to narrow its reads by, in its parent's schema `parentSchema` and its
   * own; None (read the touched files whole) when it has no `byKeys` or a key column is not in both.
   */
  def of(session: SparkSession, table: Table, work: SnapshotWork, parentSchema: Schema): Option[SnapshotDeleteKeys] = {
    val snapshotSchema = ChangesPlan.schemaOf(table, work.snapshot)
    val schemas = Seq(parentSchema, snapshotSchema)
    work.byKeys.filter(keys => schemas.forall(s => keys.equalityIds.forall(path(s, _).isDefined))).map { keys =>
      val byKey = keys.files.forall(d => byKeyAlone(table, d, keys))
      val exactKeys = schemas.forall(s => keys.equalityIds.forall(id =>
        path(s, id).exists(_.size == 1) && ExactTypes.contains(s.findType(id).typeId())))
      // Without a NULL among the delete keys (by their files' counts), plain equality: a one-column key hashes as a long.
      val nullSafe = !keys.files.forall(d => keys.equalityIds.forall(id =>
        Option(d.nullValueCounts()).flatMap(counts => Option(counts.get(id))).exists(_ == 0L)))
      val exact = byKey && exactKeys
      new SnapshotDeleteKeys(keys.equalityIds, table.schema(), deleteRows(session, table, work, snapshotSchema, keys, exact),
        nullSafe, exact)
    }
  }

  /**
   * Whether delete file `d` of `keys` deletes every row of its keys live in the parent, as a global
   * one does: it is global, or its partition is a function of its key columns (every partition
   * field's source is one of them, or void, so a key's rows all lie in its partition, as Iceberg's
   * spec has every row lie in its file's partition) and every data file of the parent is in its
   * spec (none in a spec it does not apply to).
   */
  private def byKeyAlone(table: Table, d: org.apache.iceberg.DeleteFile, keys: SnapshotEqualityDeletes): Boolean = {
    val spec = table.specs().get(d.specId())
    spec.isUnpartitioned || (keys.parentSpecs == Set(d.specId().intValue) &&
      spec.fields().asScala.forall(f => f.transform().isVoid || keys.equalityIds.contains(f.sourceId())))
  }

  /**
   * Whether a row of `rows` (read in `schema`) has the key of a row of `keys` (`_eqdelete_key_0`,
   * ... for the fields `ids`): NULL-safe unless `nullSafe` is false and the key columns have the
   * names the table's current schema gives them (plain equality makes Spark push `key IS NOT
   * NULL` into the scan, which Iceberg binds to the current schema: a time-travel read of a column
   * renamed since would fail).
   */
  def matches(rows: DataFrame, schema: Schema, ids: Seq[Int], currentSchema: Schema, keys: DataFrame, nullSafe: Boolean): Column = {
    val plain = !nullSafe && ids.map(path(schema, _)) == ids.map(path(currentSchema, _))
    ids.zipWithIndex.map { case (id, i) =>
      val (column, key) = (rows.col(path(schema, id).get.map(ChangesPlan.quote).mkString(".")), keys(s"_eqdelete_key_$i"))
      if (plain) column === key else column <=> key
    }.reduce(_ && _)
  }

  /**
   * The snapshot's delete rows (`_eqdelete_key_0`, ...), as the join strategy reads them, with
   * its size estimate, so Spark broadcasts them when they are small.
   */
  private def deleteRows(session: SparkSession, table: Table, work: SnapshotWork, schema: Schema,
      keys: SnapshotEqualityDeletes, exact: Boolean): DataFrame = {
    val sc = session.sparkContext
    val reader = new DeleteRowReader(table.io(), schema, keys.equalityIds)
    val refs = keys.files.map(f => EqualityDeleteRef(f, ScanDeletes.GlobalScope, f.dataSequenceNumber()))
    val described = keys.equalityIds.map(id => path(schema, id).get.mkString(".")).mkString("(", ", ", ")")
    val rdd = DeleteRows.rdd(sc, reader, refs, math.min(refs.size, sc.defaultParallelism), described)
    val output = reader.keyTypes.zipWithIndex.map { case (t, i) => AttributeReference(s"_eqdelete_key_$i", t)() } ++
      Seq(AttributeReference("_eqdelete_scope", LongType, nullable = false)(),
        AttributeReference("_eqdelete_sequence", LongType, nullable = false)())
    val rowBytes = reader.keyTypes.map(t => KeyBytes.estimatedBytes(t).toLong).sum + 16
    val stats = Statistics(sizeInBytes = BigInt(keys.records) * rowBytes, rowCount = Some(BigInt(keys.records)))
    val label = s"of snapshot ${work.snapshot.snapshotId()} (${keys.files.size} file(s)) on $described" +
      (if (exact) ", exact" else "")
    SparkShim.dataFrame(session, DeleteRowsRelation(output, rdd, label, stats)(JoinMetrics(sc)))
  }

  /** The names from the top of `schema` down to field `id`, through structs; None when it has no such field. */
  private[changes] def path(schema: Schema, id: Int): Option[Seq[String]] = {
    def within(struct: Types.StructType): Option[Seq[String]] = struct.fields().asScala.foldLeft(Option.empty[Seq[String]]) {
      (found, field) => found.orElse {
        if (field.fieldId() == id) Some(Seq(field.name()))
        else if (field.`type`().isStructType) within(field.`type`().asStructType()).map(field.name() +: _)
        else None
      }
    }
    within(schema.asStruct())
  }
}
