// eqdelete: the Spark SQL extension jar.
//
// Spark and Iceberg are provided by the runtime, so they are compiled against as unmanaged
// jars: Spark's from the installed pyspark wheel (the exact Spark that will run the
// extension), Iceberg's runtime jar fetched by scripts/setup.sh. Both locations come from
// system properties set by that script.

def requiredDir(key: String): File = {
  val value = sys.props.getOrElse(key, sys.error(s"-D$key is not set: build through scripts/setup.sh"))
  val dir = file(value)
  if (!dir.exists) sys.error(s"-D$key=$value does not exist")
  dir
}

// scala-library comes from sbt itself; pyspark's copy is the same version but would sit twice.
def providedJars(dir: File): Seq[File] =
  (dir ** "*.jar").get.filterNot(_.getName.startsWith("scala-"))

lazy val root = (project in file("."))
  .settings(
    name := "eqdelete",
    organization := "eqdelete",
    version := "0.1.0",
    scalaVersion := "2.13.17",
    scalacOptions ++= Seq("-deprecation", "-feature", "-unchecked", "-release", "17"),
    Compile / scalaSource := baseDirectory.value / "jvm" / "src" / "main" / "scala",
    Compile / resourceDirectory := baseDirectory.value / "jvm" / "src" / "main" / "resources",
    Test / scalaSource := baseDirectory.value / "jvm" / "src" / "test" / "scala",
    Compile / unmanagedJars ++= {
      (providedJars(requiredDir("eqdelete.sparkJars")) ++
        providedJars(requiredDir("eqdelete.icebergJars"))).classpath
    },
    Compile / packageBin / artifactPath := baseDirectory.value / "build" / "jars" / "eqdelete.jar",
    Compile / packageBin / packageOptions +=
      Package.ManifestAttributes("Implementation-Version" -> version.value),
    target := baseDirectory.value / "build" / "sbt-target",
  )
