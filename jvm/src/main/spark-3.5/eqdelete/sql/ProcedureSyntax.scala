package eqdelete.sql

import org.apache.spark.sql.SparkSessionExtensions

/** How `CALL` reaches eqdelete's procedures on Spark 3.5: through eqdelete's own parser. */
private[eqdelete] object ProcedureSyntax {
  def inject(extensions: SparkSessionExtensions): Unit =
    extensions.injectParser((session, delegate) => new ProcedureCallParser(session, delegate))
}
