package eqdelete.filter

import scala.util.Random

import eqdelete.deleteindex.DeleteKeyIndex
import eqdelete.deleteindex.build.BroadcastHandle
import eqdelete.planning.{DataFileScopes, ScanDeletes}
import eqdelete.scan.DataFileProperty
import eqdelete.testing.TestSpark

import org.apache.spark.broadcast.Broadcast
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{BoundReference, Expression, GenericInternalRow, Literal}
import org.apache.spark.sql.catalyst.expressions.codegen.GenerateUnsafeProjection
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector
import org.apache.spark.sql.types.{BinaryType, BooleanType, DataType, Decimal, DecimalType, DoubleType, FloatType, IntegerType, LongType, StringType}
import org.apache.spark.sql.vectorized.{ColumnVector, ColumnarBatch}
import org.apache.spark.unsafe.types.UTF8String
import org.scalatest.funsuite.AnyFunSuite

/** Interpreted and generated code of eqdelete's expressions give the same answers. */
class ExpressionEvaluationSuite extends AnyFunSuite {

  private def bothWays(expression: Expression, rows: Seq[InternalRow]): Seq[(Any, Any)] = {
    val generated = GenerateUnsafeProjection.generate(Seq(expression))
    rows.map { row =>
      val interpreted = expression.eval(row)
      val compiled = generated(row)
      val fromCode = if (compiled.isNullAt(0)) null else compiled.get(0, expression.dataType)
      (interpreted, fromCode)
    }
  }

  test("DataFileProperty: sequence number and scope per file, the same both ways, rows of one file in a row") {
    val files = (0 until 5).map(i => s"s3://bucket/data/$i.parquet" -> (i * 10L, i % 3)).toMap
    val index = new DataFileScopes(files)
    val path = BoundReference(0, StringType, nullable = false)
    // Rows arrive file by file, each path a fresh object, as readers that decode per row hand them out.
    val rows = files.keys.toSeq.sorted.flatMap(p => Seq.fill(3)(new GenericInternalRow(Array[Any](UTF8String.fromString(p)))))
    Seq(DataFileProperty.Sequence -> ((p: String) => files(p)._1), DataFileProperty.Scope -> ((p: String) => files(p)._2.toLong))
      .foreach { case (property, expected) =>
        val results = bothWays(DataFileProperty(path, index, property), rows)
        results.zip(rows).foreach { case ((interpreted, compiled), row) =>
          val want = expected(row.getUTF8String(0).toString)
          assert(interpreted == want && compiled == want, s"$property of ${row.getUTF8String(0)}")
        }
      }
  }

  test("KeyBitsExpression: floats and doubles compare by their bits, the same both ways") {
    val doubles = Seq(0.0, -0.0, Double.NaN, java.lang.Double.longBitsToDouble(0x7ff8000000000001L), 1.5, null)
    val results = bothWays(eqdelete.join.KeyBitsExpression(BoundReference(0, DoubleType, nullable = true)),
      doubles.map(d => new GenericInternalRow(Array[Any](d)): InternalRow))
    results.foreach { case (interpreted, compiled) => assert(interpreted == compiled) }
    val bits = results.map(_._1)
    assert(bits(0) != bits(1), "-0.0 is not 0.0")
    assert(bits(2) == bits(3), "every NaN is one NaN")
    assert(bits(5) == null)
  }

  test("DataFileProperty fails the query for a file the planning did not see") {
    val property = DataFileProperty(Literal(UTF8String.fromString("/elsewhere.parquet"), StringType),
      new DataFileScopes(Map("/data.parquet" -> (1L, 0))), DataFileProperty.Sequence)
    val error = intercept[IllegalStateException](property.eval(null))
    assert(error.getMessage.contains("was not part of the delete planning"))
  }

  /** Random delete rows and data rows (key columns, scope, data sequence number), both ways against a model. */
  private def checkMatch(types: Seq[DataType], value: (Random, DataType) => Any, seed: Int): Unit = {
    val random = new Random(seed)
    val scopes = Seq(ScanDeletes.GlobalScope.toLong, 0L, 1L)
    val deletes = Seq.fill(300)((scopes(random.nextInt(3)), types.map(t => value(random, t)), 2L + random.nextInt(10)))
    val index = DeleteKeyIndex.forKeyTypes(types, deletes.size, deletes.map(_._3).max)
    deletes.foreach { case (s, k, seq) => index.add(s, k.toArray, seq) }
    index.seal()
    // Held until the end: a broadcast nothing holds may be cleaned up while its copies are in use.
    val broadcast = TestSpark.session.sparkContext.broadcast(index)
    val handle = BroadcastHandle.write(broadcast)

    val keys = types.zipWithIndex.map { case (t, i) => BoundReference(i, t, nullable = true) }
    val expression = EqualityDeleteMatch(keys, BoundReference(types.size, LongType, nullable = false),
      BoundReference(types.size + 1, LongType, nullable = false), Literal(handle, BinaryType))
    val rows = Seq.fill(2000) {
      val key = if (random.nextBoolean()) deletes(random.nextInt(deletes.size))._2 else types.map(t => value(random, t))
      (key, Seq(0L, 1L)(random.nextInt(2)), 1L + random.nextInt(12))
    }
    val inputs = rows.map { case (key, scope, seq) => new GenericInternalRow((key :+ scope :+ seq).toArray[Any]): InternalRow }
    // Iceberg's equality is Java's: NaN equals NaN, -0.0 is not 0.0 (Scala's == on numbers differs).
    def same(a: Any, b: Any) = (a, b) match {
      case (x: Array[Byte], y: Array[Byte]) => java.util.Arrays.equals(x, y)
      case (null, null) => true
      case (null, _) | (_, null) => false
      case (x: AnyRef, y: AnyRef) => x.equals(y)
    }
    def deleted(key: Seq[Any], scope: Long, seq: Long) = deletes.exists { case (s, k, dseq) =>
      (s == scope || s == ScanDeletes.GlobalScope) && k.zip(key).forall { case (a, b) => same(a, b) } && seq < dseq
    }
    val results = bothWays(expression, inputs)
    rows.zip(results).foreach { case ((key, scope, seq), (interpreted, compiled)) =>
      val expected = deleted(key, scope, seq)
      assert(interpreted == expected && compiled == expected, s"key $key scope $scope seq $seq")
    }

    // A batch at a time, as LookUpDeletedKeysExec asks: rows as they come (runs of a row or
    // two, told apart by the scope and sequence columns), and rows of a few files in long runs
    // (told apart by a file name column, past the 256 keys looked up together).
    val k = types.size
    val scattered = BatchDeleteLookup(broadcast.asInstanceOf[Broadcast[DeleteKeyIndex]], types.indices.toArray, types.toArray,
      BoundReference(k, LongType, nullable = false), BoundReference(k + 1, LongType, nullable = false),
      Array(k, k + 1), Array(LongType, LongType))
    checkBatch(scattered, types :+ LongType :+ LongType, rows.map { case (key, scope, seq) => key :+ scope :+ seq }, rows.map {
      case (key, scope, seq) => deleted(key, scope, seq) })
    val byFile = rows.sortBy { case (_, scope, seq) => (scope, seq) }
    checkBatch(scattered.copy(runOrdinals = Array(k + 2), runTypes = Array(StringType)), types :+ LongType :+ LongType :+ StringType,
      byFile.map { case (key, scope, seq) => key :+ scope :+ seq :+ UTF8String.fromString(s"file-$scope-$seq") },
      byFile.map { case (key, scope, seq) => deleted(key, scope, seq) })
    broadcast.destroy()
  }

  private def checkBatch(lookup: BatchDeleteLookup, types: Seq[DataType], rows: Seq[Seq[Any]], expected: Seq[Boolean]): Unit = {
    val columns = types.zipWithIndex.map { case (t, c) =>
      val vector = new OnHeapColumnVector(rows.size, t)
      rows.zipWithIndex.foreach { case (row, i) =>
        (t, row(c)) match {
          case (_, null) => vector.putNull(i)
          case (LongType, v: java.lang.Long) => vector.putLong(i, v)
          case (IntegerType, v: Integer) => vector.putInt(i, v)
          case (DoubleType, v: java.lang.Double) => vector.putDouble(i, v)
          case (FloatType, v: java.lang.Float) => vector.putFloat(i, v)
          case (BooleanType, v: java.lang.Boolean) => vector.putBoolean(i, v)
          case (StringType, v: UTF8String) => vector.putByteArray(i, v.getBytes)
          case (BinaryType, v: Array[Byte]) => vector.putByteArray(i, v)
          case (d: DecimalType, v: Decimal) => vector.putDecimal(i, v, d.precision)
          case (other, v) => fail(s"no vector for $v of $other")
        }
      }
      vector: ColumnVector
    }
    val out = new OnHeapColumnVector(rows.size, BooleanType)
    lookup.forTask().mark(new ColumnarBatch(columns.toArray, rows.size), out)
    expected.zipWithIndex.foreach { case (e, i) => assert(out.getBoolean(i) == e, s"row ${rows(i)} in a batch") }
  }

  /** A value of `t` from a small range (so keys repeat), NULL one time in ten. */
  private def smallValue(r: Random, t: DataType): Any =
    if (r.nextInt(10) == 0) null
    else t match {
      case LongType => java.lang.Long.valueOf(r.nextInt(100))
      case IntegerType => Integer.valueOf(r.nextInt(100))
      case StringType => UTF8String.fromString(s"k${r.nextInt(100)}")
      case BinaryType => Array[Byte](r.nextInt(30).toByte)
      case DoubleType => java.lang.Double.valueOf(Seq(0.0, -0.0, Double.NaN, 1.5, -1.5)(r.nextInt(5)))
      case FloatType => java.lang.Float.valueOf(Seq(0.0f, -0.0f, Float.NaN, 2.5f)(r.nextInt(4)))
      case BooleanType => java.lang.Boolean.valueOf(r.nextBoolean())
      case d: DecimalType => Decimal(BigDecimal(r.nextInt(20)) / 4, d.precision, d.scale)
    }

  Seq(
    "one long key (primitive index)" -> Seq(LongType),
    "one int key" -> Seq(IntegerType),
    "a string key (general index)" -> Seq(StringType),
    "a composite key" -> Seq(IntegerType, StringType),
    "a binary key" -> Seq(BinaryType),
    "a double key: NaN equals NaN, -0.0 is not 0.0" -> Seq(DoubleType),
    "a float key" -> Seq(FloatType),
    "a composite key with a double" -> Seq(DoubleType, IntegerType),
    "a boolean key" -> Seq(BooleanType),
    "a decimal and string key" -> Seq(DecimalType(10, 2), StringType),
    "a wide decimal, a boolean and a long key" -> Seq(DecimalType(30, 4), BooleanType, LongType)).zipWithIndex.foreach { case ((name, types), seed) =>
    test(s"EqualityDeleteMatch on $name") {
      checkMatch(types, (r, t) => smallValue(r, t), seed)
    }
  }
}
