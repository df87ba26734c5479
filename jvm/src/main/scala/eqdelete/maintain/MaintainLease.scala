package eqdelete.maintain

import scala.util.control.NonFatal

import com.fasterxml.jackson.databind.ObjectMapper

import eqdelete.state.{StateFiles, StateLocation}

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.eqdelete.compat.IcebergSparkTables

/**
 * Which long-running `maintain` keeps a table: a small file beside the table's kept state,
 * naming its holder and when it last renewed it (each round). One table wants one `maintain`: a
 * second process's rounds would lose every commit race to the first's and throw their work away,
 * so a service serving many tables (`--tables`) leaves a table another holder renewed lately, and
 * takes it over once that one stopped renewing it (stopped, crashed) for longer than its time to
 * live. Two processes claiming at the same instant may both hold it for a round: they stay right
 * (each brings its index forward over the other's commits), the next claim settles it.
 */
object MaintainLease {
  private val Mapper = new ObjectMapper()
  private val Name = "maintain-lease.json"

  /**
   * Claims or renews `tableName` for `holder` unless another holder renewed it within
   * `ttlSeconds`: None when `holder` holds it now, else who holds it (one line).
   */
  def claim(session: SparkSession, tableName: String, holder: String, ttlSeconds: Long): Option[String] = {
    val files = filesOf(session, tableName)
    val now = System.currentTimeMillis()
    read(files).filter { case (other, renewed) => other != holder && renewed > now - ttlSeconds * 1000 }
      .map { case (other, renewed) => s"$other, renewed ${(now - renewed) / 1000} s ago" }
      .orElse {
        files.write(Name, Mapper.createObjectNode().put("holder", holder).put("renewedAt", now).toString)
        None
      }
  }

  /** [[claim]] for Python (py4j): who holds it, or null when `holder` does. */
  def claimed(session: SparkSession, tableName: String, holder: String, ttlSeconds: Long): String =
    claim(session, tableName, holder, ttlSeconds).orNull

  /** Lets go of `tableName` if `holder` holds it: another process may take it at once. */
  def release(session: SparkSession, tableName: String, holder: String): Unit =
    try {
      val files = filesOf(session, tableName)
      if (read(files).exists(_._1 == holder)) files.delete(Seq(Name))
    } catch { case NonFatal(_) => }  // a table dropped meanwhile has nothing to let go

  private def filesOf(session: SparkSession, tableName: String): StateFiles =
    StateLocation.of(session, IcebergSparkTables.current(session, tableName))

  /**
   * The holder and when it renewed, if a lease is there. A lease being rewritten reads empty or cut
   * short for an instant where the file system overwrites in place (Hadoop's local one), so an
   * unreadable lease is read again before it counts as none (then it is written anew).
   */
  private def read(files: StateFiles, tries: Int = 5): Option[(String, Long)] =
    if (!files.exists(Name)) None
    else try {
      val node = Mapper.readTree(files.read(Name))
      Some((node.get("holder").asText(), node.get("renewedAt").asLong()))
    } catch {
      case NonFatal(_) if tries > 1 => Thread.sleep(50); read(files, tries - 1)
      case NonFatal(_) => None
    }
}
