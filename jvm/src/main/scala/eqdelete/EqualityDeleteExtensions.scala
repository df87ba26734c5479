package eqdelete

import org.apache.spark.sql.SparkSessionExtensions
import eqdelete.rules.RewriteEqualityDeleteScans

import org.apache.spark.sql.eqdelete.EqDeleteConf

/**
 * Entry point of eqdelete. Enable it with one line (see conf/spark-defaults.conf):
 * {{{
 *   spark.sql.extensions  eqdelete.EqualityDeleteExtensions
 * }}}
 * together with Iceberg's own `IcebergSparkSessionExtensions` if you use that.
 */
class EqualityDeleteExtensions extends (SparkSessionExtensions => Unit) {
  override def apply(extensions: SparkSessionExtensions): Unit = {
    // Registers the spark.eqdelete.* keys so SET validates them from the first statement on,
    // and fails now, with one line, on a bad value in the application's configuration: found
    // later, while Spark builds the session state, it would break every access to that state.
    EqDeleteConf.validateSparkConf()

    // Before Spark's scan push-down, so the new scans get its filter and column pruning.
    extensions.injectOptimizerRule(session => RewriteEqualityDeleteScans(session))

    // Lets anyone check, from plain SQL, that the extension is loaded and which build it is.
    extensions.injectFunction(VersionFunction.description)
  }
}
