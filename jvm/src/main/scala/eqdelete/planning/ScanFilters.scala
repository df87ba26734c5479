package eqdelete.planning

import scala.util.Try

import org.apache.iceberg.{Schema, Table}
import org.apache.iceberg.expressions.{Expression => IcebergExpression, Expressions}
import org.apache.spark.sql.catalyst.expressions.{Attribute, EqualTo, Expression, In, InSet, Literal, MetadataAttribute}
import org.apache.spark.sql.types.StringType
import org.apache.spark.sql.connector.catalog.{Table => SparkCatalogTable}
import org.apache.spark.sql.eqdelete.compat.{FilterTranslation, IcebergInternals, IcebergSparkTables}

/** What a Spark read of an Iceberg table means to Iceberg: the schema it reads, its filter. */
object ScanFilters {
  /** The Iceberg schema Spark reads: the current one or the snapshot's (time travel). */
  def schemaRead(sparkTable: SparkCatalogTable, table: Table, snapshotId: Long): Schema = {
    val candidates = Seq(table.schema()) ++ Try(IcebergInternals.schemaAt(table, snapshotId)).toOption
    candidates.find(s => IcebergSparkTables.sparkSchema(s) == IcebergSparkTables.schema(sparkTable)).getOrElse(
      throw DeclinedException("cannot tell which Iceberg schema the scan reads"))
  }

  /** The conjunct as Iceberg's own scan converts it to prune files, or None. */
  def icebergFilter(conjunct: Expression): Option[IcebergExpression] =
    if (conjunct.references.exists(a => MetadataAttribute.isValid(a.metadata))) None
    else FilterTranslation.toSourceFilter(conjunct).flatMap(IcebergInternals.icebergFilter)

  /** The conjuncts Iceberg can use to prune files, as Iceberg's own scan will. */
  def icebergFilter(conjuncts: Seq[Expression]): IcebergExpression =
    conjuncts.flatMap(icebergFilter(_)).foldLeft(Expressions.alwaysTrue(): IcebergExpression)((a, b) => Expressions.and(a, b))

  /**
   * The data files a read can only return rows of, when a conjunct names them by Iceberg's `_file`
   * metadata column (`_file = '...'`, `_file IN (...)`; several intersect), which Iceberg's own
   * scan cannot use to prune: eqdelete then plans and reads only those files. The conjunct itself
   * stays above the scan.
   */
  def fileRestriction(conjuncts: Seq[Expression]): Option[Set[String]] = {
    def isFile(e: Expression) = e match {
      case a: Attribute => a.name == FileColumn && MetadataAttribute.isValid(a.metadata) && a.dataType == StringType
      case _ => false
    }
    def path(v: Any): Option[String] = Option(v).map(_.toString)
    val sets = conjuncts.flatMap {
      case EqualTo(a, Literal(v, StringType)) if isFile(a) => Some(path(v).toSet)
      case EqualTo(Literal(v, StringType), a) if isFile(a) => Some(path(v).toSet)
      case In(a, values) if isFile(a) && values.forall(_.isInstanceOf[Literal]) =>
        Some(values.flatMap { case Literal(v, _) => path(v) }.toSet)
      case InSet(a, values) if isFile(a) => Some(values.flatMap(path))
      case _ => None
    }
    sets.reduceOption(_ intersect _)
  }

  private val FileColumn = "_file"
}
