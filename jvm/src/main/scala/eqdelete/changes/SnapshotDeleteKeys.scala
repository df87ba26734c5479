package eqdelete.changes

import scala.jdk.CollectionConverters._

import eqdelete.deleteindex.KeyBytes
import eqdelete.join.{DeleteRowsRelation, JoinMetrics}
import eqdelete.planning.{EqualityDeleteRef, ScanDeletes}
import eqdelete.read.{DeleteRowReader, DeleteRows}

import org.apache.iceberg.{Schema, Table}
import org.apache.iceberg.types.Types
import org.apache.spark.sql.{DataFrame, SparkSession}
import org.apache.spark.sql.catalyst.expressions.AttributeReference
import org.apache.spark.sql.catalyst.plans.logical.Statistics
import org.apache.spark.sql.eqdelete.compat.SparkShim
import org.apache.spark.sql.types.LongType

/**
 * A snapshot's deleted rows looked for among few rows. When only its equality deletes on one set
 * of key columns change the rows of the parent's files it touched (`SnapshotWork.byKeys`), every
 * row it deletes there has the key of one of its delete rows. So both reads of those files (at the
 * parent, at the snapshot) keep only such rows, by a semi-join with the snapshot's delete rows,
 * read once by Spark tasks: the position join that decides which rows went then joins thousands
 * of rows where it joined the whole files, and no shuffle carries the table.
 *
 * The semi-join only narrows: Spark's join equality is coarser than Iceberg's (it makes -0.0
 * and 0.0, and every NaN, equal) and it ignores the deletes' partitions, so the rows it keeps
 * include every row the snapshot deleted, and which of them it did delete is still decided by
 * the two reads, through the rule, by position.
 */
object SnapshotDeleteKeys {

  /** Keeps, of a read of the touched files in a schema, the rows that may be deleted: both reads the same way. */
  type Candidates = (Schema, DataFrame) => DataFrame

  /**
   * The candidates of `work` in its parent's schema `parentSchema` and its own, or every row
   * (no narrowing) when it has no `byKeys` or a key column is not in both schemas.
   */
  def of(session: SparkSession, table: Table, work: SnapshotWork, parentSchema: Schema): Candidates = {
    val snapshotSchema = ChangesPlan.schemaOf(table, work.snapshot)
    work.byKeys.filter(keys => Seq(parentSchema, snapshotSchema).forall(s => keys.equalityIds.forall(path(s, _).isDefined))) match {
      case None => (_, rows) => rows
      case Some(keys) =>
        val deleteKeys = deleteRows(session, table, work, snapshotSchema, keys)
        (schema, rows) => {
          val matches = keys.equalityIds.zipWithIndex.map { case (id, i) =>
            rows.col(path(schema, id).get.map(ChangesPlan.quote).mkString(".")) <=> deleteKeys(s"_eqdelete_key_$i")
          }.reduce(_ && _)
          rows.join(deleteKeys, matches, "left_semi")
        }
    }
  }

  /**
   * The snapshot's delete rows (`_eqdelete_key_0`, ...), as the join strategy reads them, with
   * its size estimate, so Spark broadcasts them when they are small.
   */
  private def deleteRows(session: SparkSession, table: Table, work: SnapshotWork, schema: Schema,
      keys: SnapshotEqualityDeletes): DataFrame = {
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
    SparkShim.dataFrame(session, DeleteRowsRelation(output, rdd, s"of snapshot ${work.snapshot.snapshotId()} (${keys.files.size} file(s)) on $described",
      stats)(JoinMetrics(sc)))
  }

  /** The names from the top of `schema` down to field `id`, through structs; None when it has no such field. */
  private def path(schema: Schema, id: Int): Option[Seq[String]] = {
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
