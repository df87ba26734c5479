package eqdelete.planning

import org.apache.iceberg.{Schema, Table}
import org.apache.iceberg.expressions.{Expression => IcebergExpression}

/**
 * The deletes of recent scans. A snapshot never changes, so the same table, snapshot,
 * filter, schema and case sensitivity always plan to the same files and deletes: a query run
 * again (a dashboard, the benchmark's rounds) skips reading the manifests a second time.
 * Declined reads are not kept; they are planned, and explained, each time. Each entry holds its
 * scan's tasks, so the cache is bounded by tasks as well as entries.
 */
object ScanDeletesCache {
  private final case class Key(tableUuid: String, location: String, snapshotId: Long, filter: String, schema: String,
      caseSensitive: Boolean, onlyFiles: Option[Set[String]])

  private val MaxEntries = 64
  private val MaxTasks = 200000L
  private var tasks = 0L
  private val entries = new java.util.LinkedHashMap[Key, (PlannedTasks, Option[ScanDeletes])](16, 0.75f, true)

  private def tasksOf(planned: (PlannedTasks, Option[ScanDeletes])): Long = planned._1.tasks.size.toLong

  private def put(key: Key, deletes: (PlannedTasks, Option[ScanDeletes])): Unit = entries.synchronized {
    Option(entries.put(key, deletes)).foreach(old => tasks -= tasksOf(old))
    tasks += tasksOf(deletes)
    val eldest = entries.entrySet().iterator()
    while ((entries.size() > MaxEntries || tasks > MaxTasks) && eldest.hasNext) {
      tasks -= tasksOf(eldest.next().getValue)
      eldest.remove()
    }
  }

  /**
   * The scan's tasks and deletes (DeletePlanner.planned): the tasks also where no equality delete
   * applies to a read restricted by `_file` (none for another read without equality deletes).
   */
  def planned(table: Table, snapshotId: Long, readSchema: Schema, filter: IcebergExpression, caseSensitive: Boolean,
      onlyFiles: Option[Set[String]] = None): (PlannedTasks, Option[ScanDeletes]) = {
    val key = Key(table.uuid().toString, table.location(), snapshotId, filter.toString, readSchema.asStruct().toString,
      caseSensitive, onlyFiles)
    entries.synchronized(Option(entries.get(key))).getOrElse {
      val whole = DeletePlanner.planned(table, snapshotId, readSchema, filter, caseSensitive, onlyFiles)
      // Tasks are served to the rewritten scans and to reads restricted by `_file`: a plain read
      // without equality deletes keeps none, which would only push out the entries that serve.
      val planned = if (whole._2.isDefined || onlyFiles.isDefined) whole else (whole._1.copy(tasks = Vector.empty, reports = Nil), None)
      put(key, planned)
      planned
    }
  }

  def clear(): Unit = entries.synchronized {
    entries.clear()
    tasks = 0
  }
}
