package eqdelete.cost

import eqdelete.cost.MaintainRoundPlan.{Facts, ReadingDataFiles, ThroughIndex}

import org.scalatest.funsuite.AnyFunSuite

/**
 * A long-running maintain's choice per round, table-driven at the points PERFORMANCE.md measured
 * (scattered tables of 10^6 to 3x10^8 rows, rounds of 10^3 to ~5x10^5 delete rows).
 */
class MaintainRoundPlanSuite extends AnyFunSuite {

  private def facts(dataRows: Long, deleteRows: Long, held: Boolean) =
    Facts(dataFilesToRead = math.max(1, (dataRows / 1000000).toInt), dataRowsToRead = dataRows, deleteRows = deleteRows,
      indexHeld = held)

  private def kind(setting: LiveIndexSetting, f: Facts): String = MaintainRoundPlan.choose(setting, f) match {
    case _: ThroughIndex => "index"
    case _: ReadingDataFiles => "read"
  }

  test("auto takes the index where its lookups cost less than reading the data files' keys, as measured") {
    val measured = Seq(
      // data rows, new delete rows, with the index held, without
      (1000000L, 1000L, "read", "read"),          // 10^6: reading 2 files beats the lookup's jobs at every size
      (1000000L, 100000L, "read", "read"),
      (10000000L, 1000L, "index", "index"),       // 10^7: 0.53 s against 0.88 s
      (10000000L, 10000L, "index", "index"),      // 0.73 against 0.85
      (10000000L, 50000L, "index", "read"),       // near the crossing: a held index stays, none is built
      (10000000L, 100000L, "read", "read"),       // 2.02 against 1.09
      (100000000L, 100000L, "index", "index"),    // 10^8: 1.99 against 5.83
      (100000000L, 500000L, "index", "read"),     // the stream's rounds, about even: ~5.3 s through the index, ~5.5 s reading
      (100000000L, 2000000L, "read", "read"),
      (300000000L, 100000L, "index", "index"))    // 3x10^8: 2.71 against 12.85
    measured.foreach { case (rows, deletes, held, notHeld) =>
      assert(kind(LiveIndexSetting.Auto, facts(rows, deletes, held = true)) == held, (rows, deletes, "held"))
      assert(kind(LiveIndexSetting.Auto, facts(rows, deletes, held = false)) == notHeld, (rows, deletes, "not held"))
    }
  }

  test("the why names both costs, and a held index dropped") {
    val why = MaintainRoundPlan.choose(LiveIndexSetting.Auto, facts(1000000L, 100000L, held = true)).why
    assert(why.contains("reading 1 data files (1,000,000 rows)") && why.contains("looking 100,000 delete rows up") &&
      why.contains("the index was dropped"), why)
    assert(!MaintainRoundPlan.choose(LiveIndexSetting.Auto, facts(1000000L, 100000L, held = false)).why.contains("dropped"))
  }

  test("always and never leave metadata aside") {
    assert(kind(LiveIndexSetting.Always, facts(1000L, 1000000000L, held = false)) == "index")
    assert(kind(LiveIndexSetting.Never, facts(1000000000L, 1L, held = true)) == "read")
  }

  test("the setting's values, true and false among them (its values before auto)") {
    assert(Seq("auto", "always", "never", "true", "false").map(LiveIndexSetting.parse) ==
      Seq(LiveIndexSetting.Auto, LiveIndexSetting.Always, LiveIndexSetting.Never, LiveIndexSetting.Always, LiveIndexSetting.Never))
    assertThrows[IllegalArgumentException](LiveIndexSetting.parse("sometimes"))
  }
}
