package eqdelete.read

import java.nio.ByteBuffer
import java.time.{LocalDate, LocalDateTime, OffsetDateTime, ZoneOffset}

import org.apache.iceberg.types.Types
import org.apache.spark.sql.types.Decimal
import org.apache.spark.unsafe.types.UTF8String
import org.scalatest.funsuite.AnyFunSuite

/** Iceberg's generic values, as delete files hold them, to the Catalyst values Spark's rows hold. */
class IcebergToCatalystSuite extends AnyFunSuite {

  private def convert(t: org.apache.iceberg.types.Type, v: Any): Any = DeleteRowReader.toCatalyst(t, v)

  test("every key type converts to the value Spark's row holds") {
    val micros = 1709287200123456L
    val cases: Seq[(String, org.apache.iceberg.types.Type, Any, Any)] = Seq(
      ("boolean", Types.BooleanType.get(), java.lang.Boolean.TRUE, true),
      ("int", Types.IntegerType.get(), Integer.valueOf(7), 7),
      ("long", Types.LongType.get(), java.lang.Long.valueOf(1L << 40), 1L << 40),
      ("long read as int", Types.LongType.get(), Integer.valueOf(7), 7L),
      ("string", Types.StringType.get(), "héllo", UTF8String.fromString("héllo")),
      ("date", Types.DateType.get(), LocalDate.of(2024, 3, 1), LocalDate.of(2024, 3, 1).toEpochDay.toInt),
      ("date as days", Types.DateType.get(), Integer.valueOf(19783), 19783),
      ("timestamptz", Types.TimestampType.withZone(),
        OffsetDateTime.of(2024, 3, 1, 10, 0, 0, 123456000, ZoneOffset.ofHours(2)),
        OffsetDateTime.of(2024, 3, 1, 8, 0, 0, 123456000, ZoneOffset.UTC).toEpochSecond * 1000000L + 123456L),
      ("timestamp", Types.TimestampType.withoutZone(), LocalDateTime.of(2024, 3, 1, 10, 0, 0, 123456000),
        LocalDateTime.of(2024, 3, 1, 10, 0).toEpochSecond(ZoneOffset.UTC) * 1000000L + 123456L),
      ("timestamp as micros", Types.TimestampType.withoutZone(), java.lang.Long.valueOf(micros), micros),
      ("decimal", Types.DecimalType.of(10, 2), new java.math.BigDecimal("12.50"), Decimal(new java.math.BigDecimal("12.50"), 10, 2)),
      ("null", Types.LongType.get(), null, null))
    cases.foreach { case (name, t, in, out) => assert(convert(t, in) == out, name) }
  }

  test("binary keys become a copy of the buffer's remaining bytes") {
    val buffer = ByteBuffer.wrap(Array[Byte](9, 1, 2, 3))
    buffer.get() // a position that is not 0
    val bytes = convert(Types.BinaryType.get(), buffer).asInstanceOf[Array[Byte]]
    assert(bytes.toSeq == Seq[Byte](1, 2, 3))
    assert(buffer.position() == 1, "the buffer is left as it was")
  }
}
