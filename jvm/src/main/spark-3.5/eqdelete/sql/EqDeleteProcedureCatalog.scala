package eqdelete.sql

import org.apache.spark.sql.connector.catalog.CatalogPlugin
import org.apache.spark.sql.util.CaseInsensitiveStringMap

/**
 * eqdelete's procedure catalog on Spark 3.5, registered as on Spark 4.x:
 * {{{
 *   spark.sql.catalog.eqdelete  eqdelete.sql.EqDeleteProcedureCatalog
 * }}}
 * Spark 3.5 has no `CALL` of its own, so `ProcedureCallParser` reads a `CALL` that names this
 * catalog's procedures; the catalog itself only gives them their SQL name. No tables.
 */
class EqDeleteProcedureCatalog extends CatalogPlugin {
  private var catalogName: String = "eqdelete"

  override def initialize(name: String, options: CaseInsensitiveStringMap): Unit = catalogName = name
  override def name(): String = catalogName
}
