package eqdelete.state

import scala.util.control.NonFatal

import org.apache.iceberg.Table
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.eqdelete.compat.{EqDeleteConf, IcebergInternals}

/** Where a table's kept state is checkpointed (`spark.eqdelete.state.location`). */
object StateLocation {
  /** The default directory under a table's location: hidden, so Iceberg's orphan file removal passes over it. */
  val TableDirectory = "_eqdelete_state"

  /**
   * `table`'s state directory, named by the table's UUID (a table dropped and made again under its
   * name is another table): under the session's `spark.eqdelete.state.location` when set, else
   * under `default` when given (a stream's checkpoint), else under [[TableDirectory]] in the
   * table's location.
   */
  def of(session: SparkSession, table: Table, default: Option[String] = None): StateFiles = {
    val configured = Some(EqDeleteConf.stateLocation(session.sessionState.conf)).filter(_.nonEmpty).orElse(default)
      .getOrElse(s"${table.location().stripSuffix("/")}/$TableDirectory").stripSuffix("/")
    val properties = try table.io().properties() catch { case NonFatal(_) => java.util.Collections.emptyMap[String, String]() }
    new StateFiles(IcebergInternals.stateIO(properties, session.sessionState.newHadoopConf()), s"$configured/${table.uuid()}")
  }

  /** A directory of no table's (a probe's, a test's), on the storage its scheme names. */
  def at(session: SparkSession, root: String): StateFiles = new StateFiles(
    IcebergInternals.stateIO(java.util.Collections.emptyMap[String, String](), session.sessionState.newHadoopConf()),
    root.stripSuffix("/"))
}
