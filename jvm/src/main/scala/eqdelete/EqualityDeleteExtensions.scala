package eqdelete

import java.util.concurrent.atomic.AtomicBoolean

import org.apache.spark.sql.SparkSessionExtensions
import org.apache.spark.sql.eqdelete.compat.SupportedVersions
import org.slf4j.LoggerFactory

/**
 * Entry point of eqdelete. Enable it with one line (see conf/spark-defaults.conf):
 * {{{
 *   spark.sql.extensions  eqdelete.EqualityDeleteExtensions
 * }}}
 * together with Iceberg's own `IcebergSparkSessionExtensions` if you use that.
 *
 * On a Spark or Iceberg version the jar was not built and tested for, it injects nothing and
 * logs one warning: every query then runs exactly as it would without eqdelete.
 */
class EqualityDeleteExtensions extends (SparkSessionExtensions => Unit) {
  override def apply(extensions: SparkSessionExtensions): Unit = {
    // Checked first, touching nothing version-specific: a mismatched pair could fail to link.
    SupportedVersions.unsupported match {
      case Some(why) => EqualityDeleteExtensions.standAside(why)
      case None => Injections(extensions)
    }
  }
}

object EqualityDeleteExtensions {
  private val warned = new AtomicBoolean(false)

  private def standAside(why: String): Unit = if (warned.compareAndSet(false, true)) {
    LoggerFactory.getLogger(classOf[EqualityDeleteExtensions]).warn(
      s"eqdelete ${SupportedVersions.eqdelete} stands aside: $why. Queries run without it.")
  }
}
