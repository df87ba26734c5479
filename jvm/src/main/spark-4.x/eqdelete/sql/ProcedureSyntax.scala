package eqdelete.sql

import org.apache.spark.sql.SparkSessionExtensions

/** How `CALL` reaches eqdelete's procedures on Spark 4.x: Spark's own, through `EqDeleteProcedureCatalog`. */
private[eqdelete] object ProcedureSyntax {
  def inject(extensions: SparkSessionExtensions): Unit = ()
}
