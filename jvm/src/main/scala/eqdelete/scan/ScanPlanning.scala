package eqdelete.scan

/** How often rewritten scans were served the delete planning's tasks, or planned again (for tests and logs). */
object ScanPlanning {
  val servedPlanned = new java.util.concurrent.atomic.AtomicLong()
  val plannedAgain = new java.util.concurrent.atomic.AtomicLong()
}
