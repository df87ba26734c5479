package eqdelete.sql

import scala.jdk.CollectionConverters._

import eqdelete.resolve.ResolveEqualityDeletes

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow
import org.apache.spark.sql.connector.catalog.{Identifier, ProcedureCatalog}
import org.apache.spark.sql.connector.catalog.procedures.{BoundProcedure, ProcedureParameter, UnboundProcedure}
import org.apache.spark.sql.connector.read.{LocalScan, Scan}
import org.apache.spark.sql.types.{BooleanType, DataType, DoubleType, IntegerType, LongType, StringType, StructField, StructType}
import org.apache.spark.sql.util.CaseInsensitiveStringMap
import org.apache.spark.unsafe.types.UTF8String

/**
 * A catalog of eqdelete's SQL procedures (Spark 4.0 and later, which run `CALL` themselves):
 * {{{
 *   spark.sql.catalog.eqdelete  eqdelete.sql.ResolveProcedureCatalog
 *
 *   CALL eqdelete.system.resolve_equality_deletes(table => 'local.db.t', where => 'region = 3', dry_run => false)
 * }}}
 * It holds procedures only, no tables. Spark 3.5 has no `CALL` of its own (Iceberg's parser
 * takes only its own procedures' names there), so on 3.5 the Python function and the CLI serve.
 */
class ResolveProcedureCatalog extends ProcedureCatalog {
  private var catalogName: String = "eqdelete"

  override def initialize(name: String, options: CaseInsensitiveStringMap): Unit = catalogName = name
  override def name(): String = catalogName

  override def loadProcedure(identifier: Identifier): UnboundProcedure =
    if (identifier.namespace().toSeq == Seq("system") && identifier.name().equalsIgnoreCase(ResolveProcedure.name())) {
      ResolveProcedure
    } else {
      throw new IllegalArgumentException(s"eqdelete: no procedure ${(identifier.namespace() :+ identifier.name()).mkString(".")} " +
        s"in catalog $catalogName; it has system.${ResolveProcedure.name()}")
    }

  // No `override`: Spark 4.0's ProcedureCatalog does not declare it (4.1 does, for SHOW PROCEDURES).
  def listProcedures(namespace: Array[String]): Array[Identifier] =
    if (namespace.toSeq == Seq("system")) Array(Identifier.of(namespace, ResolveProcedure.name())) else Array.empty
}

/** `system.resolve_equality_deletes(table, where, dry_run)`: one row, the run's result. */
object ResolveProcedure extends UnboundProcedure with BoundProcedure {
  override def name(): String = "resolve_equality_deletes"
  override def description(): String =
    "turns a table's equality deletes into position deletes (format v2) or deletion vectors (v3) and removes them, in one commit"
  override def bind(inputType: StructType): BoundProcedure = this
  override def isDeterministic: Boolean = false

  override def parameters(): Array[ProcedureParameter] = Array(
    ProcedureParameter.in("table", StringType).build(),
    ProcedureParameter.in("where", StringType).defaultValue("NULL").build(),
    ProcedureParameter.in("dry_run", BooleanType).defaultValue("false").build())

  private val fields: Seq[(String, DataType)] = Seq(
    "table" -> StringType, "starting_snapshot_id" -> LongType, "snapshot_id" -> LongType, "format_version" -> IntegerType,
    "equality_delete_files_removed" -> IntegerType, "equality_delete_files_kept" -> IntegerType,
    "rows_resolved" -> LongType, "position_delete_files_written" -> IntegerType, "deletion_vectors_written" -> IntegerType,
    "delete_files_replaced" -> IntegerType, "dry_run" -> BooleanType, "seconds" -> DoubleType)
  private val schema = StructType(fields.map { case (n, t) => StructField(n, t, nullable = n == "snapshot_id") })

  override def call(input: InternalRow): java.util.Iterator[Scan] = {
    val table = input.getUTF8String(0).toString
    val where = if (input.isNullAt(1)) null else input.getUTF8String(1).toString
    val dryRun = !input.isNullAt(2) && input.getBoolean(2)
    val result = ResolveEqualityDeletes.run(SparkSession.active, table, where, dryRun)
    val values = result.asJava
    val row = new GenericInternalRow(fields.map { case (n, _) =>
      values.get(n) match {
        case s: String => UTF8String.fromString(s)
        case other => other
      }
    }.toArray[Any])
    Iterator[Scan](ResolveResultScan(schema, Array(row))).asJava
  }
}

/** The procedure's rows, as Spark's CALL takes them. */
final case class ResolveResultScan(schema: StructType, resultRows: Array[InternalRow]) extends LocalScan {
  override def rows(): Array[InternalRow] = resultRows
  override def readSchema(): StructType = schema
}
