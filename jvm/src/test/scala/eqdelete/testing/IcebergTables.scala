package eqdelete.testing

import scala.jdk.CollectionConverters._

import eqdelete.write.EqualityDeleteWriter

import org.apache.spark.sql.{DataFrame, SparkSession}

/** Tables of the shared test catalog `cat`, with rows and equality deletes written through eqdelete's writer. */
final class IcebergTables(spark: SparkSession, prefix: String) {
  private var count = 0

  /**
   * A new table (k BIGINT, v STRING, p INT), format v2. `partitioned`: by identity(p), after a
   * first unpartitioned spec, so global (unpartitioned) equality deletes can be written too.
   */
  def create(partitioned: Boolean = false): String = {
    count += 1
    val name = s"cat.db.${prefix}_$count"
    spark.sql("CREATE NAMESPACE IF NOT EXISTS cat.db")
    spark.sql(s"CREATE TABLE $name (k BIGINT, v STRING, p INT) USING iceberg TBLPROPERTIES ('format-version'='2')")
    if (partitioned) spark.sql(s"ALTER TABLE $name ADD PARTITION FIELD p")
    name
  }

  /** Rows (k, v, p), one data file per partition. */
  def insert(table: String, rows: Seq[(Long, String, Int)]): Unit = {
    import spark.implicits._
    rows.toDF("k", "v", "p").repartition($"p").sortWithinPartitions("p").writeTo(table).append()
  }

  /** Equality deletes on `keys` with rows of `frame` (its columns include the keys and p), one file per partition. */
  def delete(table: String, keys: Seq[String], frame: DataFrame, global: Boolean = false): Unit =
    EqualityDeleteWriter.commit(spark, table, keys.asJava, frame.coalesce(1), null, global)

  def deleteKeys(table: String, keys: Seq[(Long, Int)], global: Boolean = false): Unit = {
    import spark.implicits._
    delete(table, Seq("k"), keys.toDF("k", "p"), global)
  }
}
