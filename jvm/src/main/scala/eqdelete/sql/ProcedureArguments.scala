package eqdelete.sql

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.types.DataType

/** A parameter of an eqdelete procedure; an optional one is NULL when the call leaves it out. */
private[eqdelete] final case class ProcedureParameter(name: String, dataType: DataType, required: Boolean)

/** A procedure call's arguments, in the order the procedure declares its parameters. */
private[eqdelete] final class ProcedureArguments(procedure: String, parameters: Seq[ProcedureParameter], row: InternalRow) {
  private def index(name: String): Int = parameters.indexWhere(_.name == name) match {
    case -1 => throw new IllegalStateException(s"$procedure declares no parameter $name")
    case i => i
  }

  def string(name: String): Option[String] = {
    val i = index(name)
    if (row.isNullAt(i)) None else Some(row.getUTF8String(i).toString)
  }

  /** A string the call must give, not blank. */
  def requiredString(name: String): String = string(name).filter(_.trim.nonEmpty).getOrElse(
    throw new IllegalArgumentException(s"eqdelete: $procedure needs $name, a non-empty string"))

  def boolean(name: String, default: Boolean): Boolean = {
    val i = index(name)
    if (row.isNullAt(i)) default else row.getBoolean(i)
  }

  def int(name: String): Option[Int] = {
    val i = index(name)
    if (row.isNullAt(i)) None else Some(row.getInt(i))
  }

  def long(name: String): Option[Long] = {
    val i = index(name)
    if (row.isNullAt(i)) None else Some(row.getLong(i))
  }

  /** A map of strings; a NULL value is kept as null, a NULL map is empty. */
  def stringMap(name: String): Map[String, String] = {
    val i = index(name)
    if (row.isNullAt(i)) Map.empty
    else {
      val map = row.getMap(i)
      (0 until map.numElements()).map { j =>
        map.keyArray().getUTF8String(j).toString ->
          (if (map.valueArray().isNullAt(j)) null else map.valueArray().getUTF8String(j).toString)
      }.toMap
    }
  }

  def strings(name: String): Seq[String] = {
    val i = index(name)
    if (row.isNullAt(i)) Nil
    else {
      val array = row.getArray(i)
      (0 until array.numElements()).map { j =>
        if (array.isNullAt(j)) throw new IllegalArgumentException(s"eqdelete: $procedure: $name holds a NULL")
        array.getUTF8String(j).toString
      }
    }
  }
}
