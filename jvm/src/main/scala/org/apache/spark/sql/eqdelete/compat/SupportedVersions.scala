package org.apache.spark.sql.eqdelete.compat

import java.util.Properties

import scala.util.control.NonFatal

/**
 * The Spark line this jar was built for and the Iceberg release lines it is tested with
 * (`eqdelete/build.properties`, written by the build), against the versions on the classpath.
 * Reads only public API (`SPARK_VERSION`, `IcebergBuild`), so it works on any Spark and any
 * Iceberg, or none.
 */
object SupportedVersions {
  private lazy val built: Properties = {
    val props = new Properties()
    val stream = getClass.getResourceAsStream("/eqdelete/build.properties")
    if (stream != null) try props.load(stream) finally stream.close()
    props
  }

  def eqdelete: String = Option(getClass.getPackage.getImplementationVersion).getOrElse("dev")
  def sparkLine: String = built.getProperty("spark.line", "?")
  def icebergLines: Seq[String] = built.getProperty("iceberg.lines", "").split(",").map(_.trim).filter(_.nonEmpty).toSeq

  def spark: String = org.apache.spark.SPARK_VERSION

  /** Iceberg's version, or None when no Iceberg runtime is on the classpath. */
  def iceberg: Option[String] = try Some(org.apache.iceberg.IcebergBuild.version()) catch {
    case _: LinkageError | NonFatal(_) => None
  }

  /** "4.1.4" -> "4.1" */
  private def line(version: String): String = version.split("[.-]").take(2).mkString(".")

  /** Why eqdelete must stand aside on this classpath, or None when the pair is supported. */
  def unsupported: Option[String] = {
    val supported = s"this eqdelete jar supports Spark $sparkLine.x with Iceberg ${icebergLines.map(_ + ".x").mkString(" or ")}"
    iceberg match {
      case None => Some(s"no Iceberg runtime on the classpath (Spark $spark); $supported")
      case Some(found) if line(spark) != sparkLine || !icebergLines.contains(line(found)) =>
        Some(s"found Spark $spark with Iceberg $found, but $supported")
      case _ => None
    }
  }

  /** What `eqdelete_version()` says: eqdelete's version and the Spark and Iceberg in use. */
  def describe: String = s"$eqdelete (Spark $spark, Iceberg ${iceberg.getOrElse("none")})"
}
