// eqdelete: one Spark SQL extension jar per Spark line of the support matrix
// (python/eqdelete/matrix.txt), from one source tree.
//
// Spark and Iceberg are provided by the runtime, so they are compiled against as unmanaged
// jars: Spark's (and Scala's) from the pyspark wheel installed for that line by
// scripts/setup.sh (the exact Spark that will run the extension), Iceberg's runtime for that
// line at the oldest tested release, fetched by the same script into build/deps.
//
// Shared code lives in jvm/src/main/scala and never names a Spark version; what differs between
// lines is in small shim folders (see shimFolders): compat shims (org.apache.spark.sql.eqdelete.compat)
// and, for Spark's CALL, which 3.5 lacks, the SQL procedure entry points (eqdelete.sql).


val version0 = {
  val pyproject = IO.read(file("pyproject.toml"))
  """(?m)^version = "([^"]+)"""".r.findFirstMatchIn(pyproject).map(_.group(1)).getOrElse(sys.error("no version in pyproject.toml"))
}

/** Rows of the support matrix: Spark line -> (Scala binary version, tested Iceberg releases). */
val matrix: Map[String, (String, Seq[String])] =
  IO.readLines(file("python/eqdelete/matrix.txt")).map(_.takeWhile(_ != '#').trim).filter(_.nonEmpty).map { row =>
    val fields = row.split("\\s+").toSeq
    fields.head -> (fields(1), fields.drop(2))
  }.toMap

val primaryLine: String = matrix.keys.maxBy(_.split('.').map(_.toInt).toSeq match { case Seq(a, b) => a * 100 + b })

/** pyspark's jars of a line's virtualenv: .venv for the primary line, build/venvs/spark-<line> else. */
def sparkJarsDir(line: String): File = {
  val venv = if (line == primaryLine) file(".venv") else file(s"build/venvs/spark-$line")
  (venv ** "site-packages" / "pyspark" / "jars").get.headOption
    .getOrElse(sys.error(s"no pyspark for Spark $line in $venv: run scripts/setup.sh"))
}

/** The jar's version from a file name: scala-library-2.13.17.jar -> 2.13.17. */
def versionIn(dir: File, prefix: String): String =
  (dir * s"$prefix*.jar").get.map(_.getName.stripPrefix(prefix).stripSuffix(".jar")).headOption
    .getOrElse(sys.error(s"no $prefix*.jar in $dir"))

// Scala's own jars come from sbt (the same version as the line's); everything else is provided.
def providedJars(dir: File): Seq[File] =
  (dir ** "*.jar").get.filterNot(f => Seq("scala-library-", "scala-reflect-", "scala-compiler-").exists(f.getName.startsWith))

/**
 * The shim folders of a line. Spark's own API differs between 3.5 and 4.x (3.5 has no CALL);
 * Iceberg's between its 3.5/4.0 and 4.1 Spark modules (SparkTable's constructors) and between
 * the releases the jars compile against (1.10 for 3.5 and 4.0, which lacks Scan.minRowsRequested).
 */
def shimFolders(line: String): Seq[String] = line match {
  case "3.5" => Seq("spark-3.5", "iceberg-spark-3.5-4.0")
  case "4.0" => Seq("spark-4.x", "iceberg-spark-3.5-4.0")
  case "4.1" => Seq("spark-4.x", "iceberg-spark-4.1")
  case other => sys.error(s"no shims for Spark $other")
}

def lineProject(id: String, line: String): Project = {
  val (scalaBinary, icebergs) = matrix.getOrElse(line, sys.error(s"Spark $line is not in matrix.txt"))
  val jarsDir = sparkJarsDir(line)
  val root = file(".").getAbsoluteFile
  Project(id, file(s"build/sbt/spark-$line"))
    .settings(
      name := s"eqdelete-spark-${line}_$scalaBinary",
      organization := "eqdelete",
      version := version0,
      scalaVersion := versionIn(jarsDir, "scala-library-"),
      scalacOptions ++= Seq("-deprecation", "-feature", "-unchecked", "-release", "17"),
      Compile / unmanagedSourceDirectories := (Seq("scala") ++ shimFolders(line)).map(root / "jvm" / "src" / "main" / _),
      Compile / unmanagedResourceDirectories := Seq(root / "jvm" / "src" / "main" / "resources"),
      Compile / unmanagedJars ++= (providedJars(jarsDir) :+
        root / "build" / "deps" / s"iceberg-spark-runtime-${line}_$scalaBinary-${icebergs.head}.jar").classpath,
      // What the extension checks at session start: the Spark line it was built for and the
      // Iceberg release lines it is tested with; it stands aside on any other.
      Compile / resourceGenerators += Def.task {
        val out = (Compile / resourceManaged).value / "eqdelete" / "build.properties"
        val lines = icebergs.map(_.split('.').take(2).mkString(".")).distinct
        IO.write(out, s"spark.line=$line\niceberg.lines=${lines.mkString(",")}\n")
        Seq(out)
      }.taskValue,
      Compile / packageBin / artifactPath := root / "build" / "jars" / s"eqdelete-spark-${line}_$scalaBinary-$version0.jar",
      Compile / packageBin / packageOptions +=
        Package.ManifestAttributes("Implementation-Version" -> version0),
      target := root / "build" / "sbt-target" / s"spark-$line",
      // The Scala unit-test tier: scalatest against the same provided Spark and Iceberg, in a
      // forked JVM opened up as Spark's own launcher opens it on Java 17.
      libraryDependencies += "org.scalatest" %% "scalatest" % "3.2.19" % Test,
      Test / unmanagedSourceDirectories := Seq(root / "jvm" / "src" / "test" / "scala"),
      Test / fork := true,
      Test / baseDirectory := root,
      // The Python tests' JVM options (SMALL_JVM_OPTIONS, tests/conftest.py, which says why): C1
      // only, into a code cache as large as tiered compilation's, and one GC thread.
      Test / javaOptions ++= Seq("-Xmx2g", "-XX:TieredStopAtLevel=1", "-XX:ReservedCodeCacheSize=256m",
        "-XX:+UseSerialGC", "-XX:+IgnoreUnrecognizedVMOptions",
        "-Djdk.reflect.useDirectMethodHandle=false",
        "-Dio.netty.tryReflectionSetAccessible=true") ++
        Seq("java.lang", "java.lang.invoke", "java.lang.reflect", "java.io", "java.net", "java.nio", "java.util",
          "java.util.concurrent", "java.util.concurrent.atomic", "sun.nio.ch", "sun.nio.cs", "sun.security.action",
          "sun.util.calendar").map(p => s"--add-opens=java.base/$p=ALL-UNNAMED"),
      Test / testOptions += Tests.Argument(TestFrameworks.ScalaTest, "-oD"),
    )
}

lazy val spark35 = lineProject("spark35", "3.5")
lazy val spark40 = lineProject("spark40", "4.0")
lazy val spark41 = lineProject("spark41", "4.1")

lazy val root = (project in file("."))
  .aggregate(spark35, spark40, spark41)
  .settings(
    publish / skip := true,
    Compile / sources := Nil,
    target := baseDirectory.value / "build" / "sbt-target" / "root",
    Global / onLoad := (Global / onLoad).value.andThen { state =>
      require(matrix.keySet == Set("3.5", "4.0", "4.1"), s"build.sbt builds Spark 3.5, 4.0 and 4.1; matrix.txt lists ${matrix.keys.mkString(", ")}")
      state
    },
  )
