package eqdelete.changes

import org.apache.spark.sql.SQLContext
import org.apache.spark.sql.eqdelete.compat.IcebergSparkTables
import org.apache.spark.sql.execution.streaming.Source
import org.apache.spark.sql.sources.{DataSourceRegister, StreamSourceProvider}
import org.apache.spark.sql.types.StructType

/**
 * `spark.readStream.format("eqdelete-changes").load("catalog.db.table")`: the table's changes as a
 * micro-batch stream (ChangesSource), in the columns of a batch read of them, the table's as they
 * are when the query starts. Registered by name through Java's service loader, as Spark finds
 * every data source.
 */
class ChangesSourceProvider extends DataSourceRegister with StreamSourceProvider {
  override def shortName(): String = ChangesSourceProvider.Name

  override def sourceSchema(sqlContext: SQLContext, schema: Option[StructType], providerName: String,
      parameters: Map[String, String]): (String, StructType) = {
    refuseSchema(schema)
    val options = ChangesStreamOptions.parse(parameters)
    (shortName(), ChangesPlan.schema(IcebergSparkTables.uncached(sqlContext.sparkSession, options.table).schema()))
  }

  override def createSource(sqlContext: SQLContext, metadataPath: String, schema: Option[StructType],
      providerName: String, parameters: Map[String, String]): Source = {
    refuseSchema(schema)
    val options = ChangesStreamOptions.parse(parameters)
    val session = sqlContext.sparkSession
    new ChangesSource(session, options, IcebergSparkTables.uncached(session, options.table).schema(),
      new ChangesStreamLog(metadataPath, session.sparkContext.hadoopConfiguration))
  }

  private def refuseSchema(schema: Option[StructType]): Unit = schema.foreach { _ =>
    throw new IllegalArgumentException("eqdelete-changes: the stream's columns are its table's and the change " +
      "columns; do not give a schema")
  }
}

object ChangesSourceProvider {
  val Name = "eqdelete-changes"
}
