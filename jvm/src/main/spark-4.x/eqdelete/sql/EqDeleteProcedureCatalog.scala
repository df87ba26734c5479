package eqdelete.sql

import scala.jdk.CollectionConverters._

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.connector.catalog.{Identifier, ProcedureCatalog}
import org.apache.spark.sql.connector.catalog.procedures.{BoundProcedure, ProcedureParameter => SparkParameter, UnboundProcedure}
import org.apache.spark.sql.connector.read.{LocalScan, Scan}
import org.apache.spark.sql.types.StructType
import org.apache.spark.sql.util.CaseInsensitiveStringMap

/**
 * eqdelete's SQL procedures as a catalog, for Spark 4.x's own `CALL`:
 * {{{
 *   spark.sql.catalog.eqdelete  eqdelete.sql.EqDeleteProcedureCatalog
 *
 *   CALL eqdelete.system.resolve_equality_deletes(table => 'local.db.t', where => 'region = 3', dry_run => false)
 *   CALL eqdelete.system.write_equality_deletes(table => 'local.db.t', key_columns => array('id'), deletes => 'SELECT id FROM gone')
 * }}}
 * It holds procedures only, no tables.
 */
class EqDeleteProcedureCatalog extends ProcedureCatalog {
  private var catalogName: String = "eqdelete"

  override def initialize(name: String, options: CaseInsensitiveStringMap): Unit = catalogName = name
  override def name(): String = catalogName

  override def loadProcedure(identifier: Identifier): UnboundProcedure = {
    val path = identifier.namespace().toSeq :+ identifier.name()
    (if (identifier.namespace().toSeq == EqDeleteProcedure.namespace) EqDeleteProcedure.named(identifier.name()) else None)
      .map(SparkProcedure)
      .getOrElse(throw EqDeleteProcedure.unknown(catalogName, path))
  }

  // No `override`: Spark 4.0's ProcedureCatalog does not declare it (4.1 does, for SHOW PROCEDURES).
  def listProcedures(namespace: Array[String]): Array[Identifier] =
    if (namespace.toSeq == EqDeleteProcedure.namespace) EqDeleteProcedure.all.map(p => Identifier.of(namespace, p.name)).toArray
    else Array.empty
}

/** An eqdelete procedure as Spark's: optional parameters default to NULL, the result is one local scan. */
private final case class SparkProcedure(procedure: EqDeleteProcedure) extends UnboundProcedure with BoundProcedure {
  override def name(): String = procedure.name
  override def description(): String = procedure.description
  override def bind(inputType: StructType): BoundProcedure = this
  override def isDeterministic: Boolean = false

  override def parameters(): Array[SparkParameter] = procedure.parameters.map { p =>
    val parameter = SparkParameter.in(p.name, p.dataType)
    (if (p.required) parameter else parameter.defaultValue("NULL")).build()
  }.toArray

  override def call(input: InternalRow): java.util.Iterator[Scan] =
    Iterator[Scan](ProcedureResultScan(procedure.output, procedure.call(SparkSession.active, input).toArray)).asJava
}

/** A procedure's rows, as Spark's CALL takes them. */
private final case class ProcedureResultScan(schema: StructType, resultRows: Array[InternalRow]) extends LocalScan {
  override def rows(): Array[InternalRow] = resultRows
  override def readSchema(): StructType = schema
}
