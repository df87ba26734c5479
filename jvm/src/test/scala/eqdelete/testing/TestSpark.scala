package eqdelete.testing

import java.nio.file.Files

import org.apache.spark.sql.SparkSession

/**
 * One local Spark session for every suite of the test JVM, with eqdelete's extension, Iceberg's,
 * and an Iceberg Hadoop catalog `cat` in a temporary directory.
 */
object TestSpark {
  lazy val session: SparkSession = {
    val warehouse = Files.createTempDirectory("eqdelete-scala-tests")
    val spark = SparkSession.builder()
      .master("local[2]")
      .appName("eqdelete-scala-tests")
      .config("spark.ui.enabled", "false")
      .config("spark.sql.shuffle.partitions", "2")
      .config("spark.default.parallelism", "2")
      .config("spark.sql.session.timeZone", "UTC")
      .config("spark.sql.extensions",
        "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions,eqdelete.EqualityDeleteExtensions")
      .config("spark.sql.catalog.cat", "org.apache.iceberg.spark.SparkCatalog")
      .config("spark.sql.catalog.cat.type", "hadoop")
      .config("spark.sql.catalog.cat.warehouse", warehouse.toUri.toString)
      .getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark
  }

  /** A fresh local directory for kept state. */
  def stateFiles(): eqdelete.state.StateFiles =
    eqdelete.state.StateLocation.at(session, Files.createTempDirectory("eqdelete-state").toUri.toString)
}
