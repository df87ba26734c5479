package eqdelete.cost

import eqdelete.cost.MaintainRoundPlan.{Facts, ReadingDataFiles, ThroughIndex}

import org.scalatest.funsuite.AnyFunSuite

/**
 * A long-running maintain's choice per round, table-driven at the points PERFORMANCE.md measured
 * (scattered tables of 10^6 to 3x10^8 rows, rounds of 10^3 to ~5x10^5 delete rows).
 */
class MaintainRoundPlanSuite extends AnyFunSuite {

  private def facts(dataRows: Long, deleteRows: Long, held: Boolean = true) =
    Facts(dataFilesToRead = math.max(1, (dataRows / 1000000).toInt), dataRowsToRead = dataRows, deleteRows = deleteRows,
      indexHeld = held)

  private def kind(plan: MaintainRoundPlan): String = plan match {
    case _: ThroughIndex => "index"
    case ReadingDataFiles(true, _) => "read, index kept up"
    case ReadingDataFiles(false, _) => "read"
  }

  test("auto takes the index where its lookups cost less than reading the data files' keys, as measured") {
    val measured = Seq(
      // data rows, new delete rows, the cheaper way measured
      (1000000L, 1000L, "read, index kept up"),       // 10^6: reading 2 files beats the lookup's jobs at every size
      (1000000L, 100000L, "read, index kept up"),
      (10000000L, 1000L, "index"),                    // 10^7: 0.53 s against 0.88 s
      (10000000L, 10000L, "index"),                   // 0.73 against 0.85
      (10000000L, 100000L, "read, index kept up"),    // 2.02 against 1.09
      (100000000L, 100000L, "index"),                 // 10^8: 1.99 against 5.83
      (100000000L, 600000L, "read, index kept up"),   // the stream's rounds: about even near 5x10^5
      (300000000L, 100000L, "index"))                 // 3x10^8: 2.71 against 12.85
    measured.foreach { case (rows, deletes, expected) =>
      assert(kind(MaintainRoundPlan.choose(LiveIndexSetting.Auto, facts(rows, deletes))) == expected, (rows, deletes))
    }
  }

  test("a round that reads keeps a held index up and builds none; one through the index builds it") {
    assert(kind(MaintainRoundPlan.choose(LiveIndexSetting.Auto, facts(1000000L, 1000L, held = false))) == "read")
    assert(kind(MaintainRoundPlan.choose(LiveIndexSetting.Auto, facts(100000000L, 1000L, held = false))) == "index")
  }

  test("the why names both costs, so a round's note says what was weighed") {
    val why = MaintainRoundPlan.choose(LiveIndexSetting.Auto, facts(10000000L, 100000L)).why
    assert(why.contains("reading 10 data files (10,000,000 rows)") && why.contains("looking 100,000 delete rows up"), why)
  }

  test("always and never leave metadata aside") {
    assert(kind(MaintainRoundPlan.choose(LiveIndexSetting.Always, facts(1000L, 1000000000L))) == "index")
    assert(kind(MaintainRoundPlan.choose(LiveIndexSetting.Never, facts(1000000000L, 1L))) == "read")
  }

  test("the setting's values, true and false among them (its values before auto)") {
    assert(Seq("auto", "always", "never", "true", "false").map(LiveIndexSetting.parse) ==
      Seq(LiveIndexSetting.Auto, LiveIndexSetting.Always, LiveIndexSetting.Never, LiveIndexSetting.Always, LiveIndexSetting.Never))
    assertThrows[IllegalArgumentException](LiveIndexSetting.parse("sometimes"))
  }
}
