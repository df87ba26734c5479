package eqdelete.cost

/**
 * What Iceberg's own reader does to read a whole table, over what reading it compacted costs,
 * from metadata: the equality-delete debt of a table as `status` shows it. Native reads every
 * data row and, in each task, puts every equality delete row that applies to the task's file
 * into a set; the floor reads the live rows once. Counting a row read and a delete row loaded as
 * one unit each ranks tables by their debt; it is not a time (a delete row costs native more
 * than a data row read: 2.8x the floor on the cdc_upsert benchmark, PERFORMANCE.md).
 */
object NativeReadEstimate {
  /**
   * @param dataRows               rows in the table's data files
   * @param deadRows               rows known deleted by position deletes or deletion vectors
   * @param deleteRowsLoadedByTasks equality delete rows native's tasks load, summed over tasks
   */
  def overFloor(dataRows: Long, deadRows: Long, deleteRowsLoadedByTasks: Long): Double = {
    val floor = math.max(1L, dataRows - deadRows)
    (dataRows + deleteRowsLoadedByTasks).toDouble / floor
  }
}
