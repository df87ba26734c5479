package eqdelete.scan

import scala.jdk.CollectionConverters._

import org.apache.iceberg.{FileContent, FileScanTask}

/** Which planned files a rewritten scan reads. */
sealed trait FileSelection extends Serializable {
  def describe: String
  /** Whether the selected files are read with equality deletes dropped, for eqdelete to apply. */
  def appliesDeletes: Boolean
  def selects(task: FileScanTask): Boolean
}

object FileSelection {
  /** Files with no equality deletes, read exactly as Iceberg plans them. */
  case object WithoutEqualityDeletes extends FileSelection {
    val describe = "files without equality deletes"
    val appliesDeletes = false
    def selects(task: FileScanTask): Boolean = !hasEqualityDeletes(task)
  }

  /** Files with equality deletes, read with those removed (position deletes and DVs kept). */
  case object EqualityDeletesRemoved extends FileSelection {
    val describe = "files with equality deletes, applied by eqdelete"
    val appliesDeletes = true
    def selects(task: FileScanTask): Boolean = hasEqualityDeletes(task)
  }

  /**
   * Every planned file, equality deletes removed where there are any: one scan instead of a
   * union of two, worth it when few rows are in files without deletes.
   */
  case object AllEqualityDeletesRemoved extends FileSelection {
    val describe = "all files, equality deletes applied by eqdelete"
    val appliesDeletes = true
    def selects(task: FileScanTask): Boolean = true
  }

  /**
   * Only the files at `locations`, equality deletes removed where there are any: what a kept
   * index of the live rows reads of the files added or changed since it was last brought forward.
   */
  final case class Only(locations: Set[String]) extends FileSelection {
    def describe: String = s"${locations.size} changed file(s), equality deletes applied by eqdelete"
    val appliesDeletes = true
    def selects(task: FileScanTask): Boolean = locations.contains(task.file().location())
  }

  /**
   * Only the files at `locations`, exactly as Iceberg plans them (deletes and all): a read left
   * native that a `_file` filter restricts to those files, which Iceberg's scan cannot prune by.
   */
  final case class Named(locations: Set[String]) extends FileSelection {
    def describe: String = s"read natively, ${locations.size} file(s) named by _file"
    val appliesDeletes = false
    def selects(task: FileScanTask): Boolean = locations.contains(task.file().location())
  }

  /** Every file exactly as Iceberg plans it: a scan eqdelete left native, named so EXPLAIN says why. */
  case object Unchanged extends FileSelection {
    val describe = "read natively"
    val appliesDeletes = false
    def selects(task: FileScanTask): Boolean = true
  }

  def hasEqualityDeletes(task: FileScanTask): Boolean =
    task.deletes().asScala.exists(_.content() == FileContent.EQUALITY_DELETES)
}
