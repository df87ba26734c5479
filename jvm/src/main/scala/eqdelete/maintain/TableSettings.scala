package eqdelete.maintain

import org.apache.iceberg.Table
import org.apache.spark.sql.eqdelete.compat.EqDeleteConf
import org.apache.spark.sql.internal.SQLConf

/**
 * How maintain treats one table: its `eqdelete.maintain.*` table properties over the session's
 * settings (declared in `EqDeleteConf`). Read afresh each time a round or `status` looks at the
 * table, so `ALTER TABLE ... SET TBLPROPERTIES` takes effect at the next round.
 *
 * @param intervalSeconds None: the service's own interval
 */
final case class TableSettings(
    enabled: Boolean,
    intervalSeconds: Option[Long],
    minEqualityDeleteFiles: Long,
    compactPositionDeleteFiles: Long,
    compactDataBytesPerHour: Long,
    compactDataDeadRatio: Double)

object TableSettings {
  /** The table's settings; a property whose value its rule refuses fails naming the table and the property. */
  def of(table: Table, conf: SQLConf): TableSettings = of(table, MaintainRound.Settings.from(conf))

  /** The same, where `session` holds the values a table property may override. */
  def of(table: Table, session: MaintainRound.Settings): TableSettings = {
    val properties = table.properties()
    def value(property: EqDeleteConf.TableProperty) = EqDeleteConf.tableValue(table.name(), properties, property)
    TableSettings(
      enabled = value(EqDeleteConf.TABLE_MAINTAIN_ENABLED).forall(_.equalsIgnoreCase("true")),
      intervalSeconds = value(EqDeleteConf.TABLE_MAINTAIN_INTERVAL_SECONDS).map(_.toLong),
      minEqualityDeleteFiles = value(EqDeleteConf.TABLE_MAINTAIN_MIN_EQUALITY_DELETE_FILES).map(_.toLong).getOrElse(1L),
      compactPositionDeleteFiles = value(EqDeleteConf.TABLE_MAINTAIN_COMPACT_POSITION_DELETE_FILES).map(_.toLong)
        .getOrElse(session.compactPositionDeleteFiles),
      compactDataBytesPerHour = value(EqDeleteConf.TABLE_MAINTAIN_COMPACT_DATA_BYTES_PER_HOUR).map(_.toLong)
        .getOrElse(session.compactDataBytesPerHour),
      compactDataDeadRatio = value(EqDeleteConf.TABLE_MAINTAIN_COMPACT_DATA_DEAD_RATIO).map(_.toDouble)
        .getOrElse(session.compactDataDeadRatio))
  }
}
