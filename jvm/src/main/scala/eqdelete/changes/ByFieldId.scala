package eqdelete.changes

import scala.jdk.CollectionConverters._

import org.apache.iceberg.Schema
import org.apache.iceberg.types.{Type, TypeUtil, Types}
import org.apache.spark.sql.{functions => F, Column, DataFrame}
import org.apache.spark.sql.eqdelete.compat.IcebergSparkTables
import org.apache.spark.sql.types.{DataType, DecimalType, DoubleType, FloatType, IntegerType, LongType}

/**
 * A snapshot's rows in another schema of the same table, matched by Iceberg field id at every
 * depth (columns, struct fields, list elements, map keys and values), as Iceberg's readers match
 * a data file's columns: a field renamed or moved keeps its values, one added since takes its
 * initial default (NULL unless set), one dropped since is not shown, and a value is only ever
 * widened by a promotion Iceberg allows (int to long, float to double, a wider decimal), never
 * cast into another field or a narrower type. Spark's own casts match structs by position.
 */
private[eqdelete] object ByFieldId {

  /** `df`, read in schema `read`, as the columns of `target`, then `keep` as they are. */
  def aligned(df: DataFrame, read: Schema, target: Schema, keep: Seq[String] = Nil): DataFrame =
    df.select(fields(read.asStruct(), target.asStruct(), name => F.col(ChangesPlan.quote(name)), "") ++ keep.map(F.col): _*)

  /**
   * What changed from schema `from` to schema `to`, field by field at every depth, in words
   * ("added column s.c", "int n promoted to long"): every change but a reordering, which matching
   * by field id carries. Empty when `to` shows every row of `from` with the same columns.
   */
  def changes(from: Schema, to: Schema): Seq[String] = structChanges(from.asStruct(), to.asStruct(), "")

  /**
   * `column`, of Spark type `from`, as Spark type `to`: as it is when they are equal, widened by a
   * promotion Iceberg allows, and otherwise refused (`what` names it).
   */
  def widened(column: Column, from: DataType, to: DataType, what: => String): Column =
    if (from == to) column
    else if (promotes(from, to)) column.cast(to)
    else throw refused(what, from.simpleString, to.simpleString)

  /**
   * Whether a value of Spark type `from` goes into type `to` by a promotion Iceberg allows
   * (`TypeUtil.isPromotionAllowed`, on Spark's types): int to long, float to double, a decimal to
   * one of its scale and more precision. A type promotes to itself.
   */
  def promotes(from: DataType, to: DataType): Boolean = (from, to) match {
    case (a, b) if a == b => true
    case (IntegerType, LongType) | (FloatType, DoubleType) => true
    case (a: DecimalType, b: DecimalType) => a.scale == b.scale && b.precision >= a.precision
    case _ => false
  }

  private def fields(read: Types.StructType, target: Types.StructType, get: String => Column, path: String): Seq[Column] =
    target.fields().asScala.toSeq.map { field =>
      Option(read.field(field.fieldId())) match {
        case Some(was) =>
          val value = convert(get(was.name()), was.`type`(), field.`type`(), path + field.name(), was.isOptional)
          (if (was.isRequired && field.isOptional) optional(value) else value).as(field.name())
        case None =>
          val value = absent(field, path + field.name())
          (if (field.isOptional && field.initialDefault() != null) optional(value) else value).as(field.name())
      }
    }

  /**
   * `column` declared nullable, as the target schema declares the field its values go into: a
   * field made optional since (or one added with a default) is optional in every snapshot's rows,
   * though the rows read or the default hold no NULL. The identity, in a form Spark cannot prove
   * non-null (it reads `CASE WHEN true THEN x END` as non-null as `x`).
   */
  private def optional(column: Column): Column = F.when(column.isNull, F.lit(null)).otherwise(column)

  /** `column`, of type `from` (and `nullable` or not there), as type `to`. */
  private def convert(column: Column, from: Type, to: Type, path: String, nullable: Boolean): Column =
    if (same(from, to)) column
    else (from, to) match {
      case (a: Types.StructType, b: Types.StructType) =>
        val rebuilt = F.struct(fields(a, b, column.getField, path + "."): _*)
        if (nullable) F.when(column.isNull, F.lit(null)).otherwise(rebuilt) else rebuilt
      case (a: Types.ListType, b: Types.ListType) =>
        F.transform(column, element => {
          val value = convert(element, a.elementType(), b.elementType(), path + ".element", a.isElementOptional)
          if (a.isElementRequired && b.isElementOptional) optional(value) else value
        })
      case (a: Types.MapType, b: Types.MapType) =>
        val keys = if (same(a.keyType(), b.keyType())) column
          else F.transform_keys(column, (k, _) => convert(k, a.keyType(), b.keyType(), path + ".key", nullable = false))
        if (same(a.valueType(), b.valueType()) && a.isValueRequired == b.isValueRequired) keys
        else F.transform_values(keys, (_, v) => {
          val value = convert(v, a.valueType(), b.valueType(), path + ".value", a.isValueOptional)
          if (a.isValueRequired && b.isValueOptional) optional(value) else value
        })
      case (a: Type.PrimitiveType, b: Type.PrimitiveType) if TypeUtil.isPromotionAllowed(a, b) =>
        column.cast(IcebergSparkTables.sparkType(b))
      case _ => throw refused(s"field $path", from.toString, to.toString)
    }

  private def refused(what: String, from: String, to: String) = new IllegalStateException(s"eqdelete: $what is $from " +
    s"in one schema and $to in another, which no schema change Iceberg allows makes: refusing to cast it")

  /** Whether `a` and `b` read the same: the same field ids, names, optionality and types in the same order. */
  private def same(a: Type, b: Type): Boolean = (a, b) match {
    case (x: Types.StructType, y: Types.StructType) =>
      x.fields().size == y.fields().size && x.fields().asScala.zip(y.fields().asScala).forall { case (p, q) =>
        p.fieldId() == q.fieldId() && p.name() == q.name() && p.isOptional == q.isOptional && same(p.`type`(), q.`type`())
      }
    case (x: Types.ListType, y: Types.ListType) =>
      x.elementId() == y.elementId() && x.isElementOptional == y.isElementOptional && same(x.elementType(), y.elementType())
    case (x: Types.MapType, y: Types.MapType) =>
      x.keyId() == y.keyId() && x.valueId() == y.valueId() && x.isValueOptional == y.isValueOptional &&
        same(x.keyType(), y.keyType()) && same(x.valueType(), y.valueType())
    case _ => a == b
  }

  /** The value of `field` in a row written before it was added: its initial default, else NULL. */
  private def absent(field: Types.NestedField, path: String): Column = {
    val sparkType = IcebergSparkTables.sparkType(field.`type`())
    Option(field.initialDefault()).fold(F.lit(null).cast(sparkType)) { value =>
      val literal = (field.`type`(), value) match {
        case (_, v: CharSequence) => F.lit(v.toString)
        case (_, v: java.util.UUID) => F.lit(v.toString)
        case (_, v: java.nio.ByteBuffer) =>
          val bytes = new Array[Byte](v.remaining())
          v.duplicate().get(bytes)
          F.lit(bytes)
        case (_: Types.DateType, v: Integer) => F.lit(java.time.LocalDate.ofEpochDay(v.longValue))
        case (t: Types.TimestampType, v: java.lang.Long) if t.shouldAdjustToUTC() =>
          F.lit(java.time.Instant.EPOCH.plus(v.longValue, java.time.temporal.ChronoUnit.MICROS))
        case (_: Types.TimestampType, v: java.lang.Long) =>
          F.lit(java.time.LocalDateTime.of(1970, 1, 1, 0, 0).plus(v.longValue, java.time.temporal.ChronoUnit.MICROS))
        case (t, v @ (_: java.lang.Number | _: java.lang.Boolean)) if t.isPrimitiveType && !t.isInstanceOf[Types.TimeType] => F.lit(v)
        case (t, _) => throw new UnsupportedOperationException(s"eqdelete: field $path has an initial default of type $t, " +
          "which the changes cannot show for rows written before it was added")
      }
      literal.cast(sparkType)
    }
  }

  private def structChanges(from: Types.StructType, to: Types.StructType, path: String): Seq[String] = {
    val toFields = to.fields().asScala.toSeq
    val fromFields = from.fields().asScala.toSeq
    val added = toFields.filter(f => from.field(f.fieldId()) == null).map(f => s"added ${kind(path)} $path${f.name()}")
    val dropped = fromFields.filter(f => to.field(f.fieldId()) == null).map(f => s"dropped ${kind(path)} $path${f.name()}")
    val changed = fromFields.flatMap(f => Option(to.field(f.fieldId())).toSeq.flatMap { g =>
      val renamed = if (f.name() != g.name()) Seq(s"renamed ${kind(path)} $path${f.name()} to ${g.name()}") else Nil
      val optional = if (f.isRequired && g.isOptional) Seq(s"made $path${g.name()} optional") else Nil
      renamed ++ optional ++ typeChanges(f.`type`(), g.`type`(), path + g.name())
    })
    added ++ dropped ++ changed
  }

  private def kind(path: String) = if (path.isEmpty) "column" else "field"

  private def typeChanges(from: Type, to: Type, path: String): Seq[String] = (from, to) match {
    case (a: Types.StructType, b: Types.StructType) => structChanges(a, b, path + ".")
    case (a: Types.ListType, b: Types.ListType) =>
      (if (a.isElementRequired && b.isElementOptional) Seq(s"made the elements of $path optional") else Nil) ++
        typeChanges(a.elementType(), b.elementType(), path + ".element")
    case (a: Types.MapType, b: Types.MapType) =>
      (if (a.isValueRequired && b.isValueOptional) Seq(s"made the values of $path optional") else Nil) ++
        typeChanges(a.keyType(), b.keyType(), path + ".key") ++ typeChanges(a.valueType(), b.valueType(), path + ".value")
    case (a, b) if a == b => Nil
    case (a, b) => Seq(s"$a $path promoted to $b")
  }
}
