package eqdelete.planning

import scala.util.Try

import org.apache.iceberg.{Schema, Table}
import org.apache.iceberg.expressions.{Expression => IcebergExpression, Expressions}
import org.apache.spark.sql.catalyst.expressions.{Expression, MetadataAttribute}
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
}
