"""Checks ``spark.eqdelete.*`` values before a session starts, with the JVM side's own rules.

The rules come from ``conf_rules.json``, generated from the extension's declarations
(``EqDeleteConf.rulesJson``, written by ``python -m eqdelete docs --write``; a test fails when
the copy is stale). Values are parsed as Spark parses them, so a value accepted here is
accepted by ``SET`` and the other way round.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Any

PREFIX = "spark.eqdelete."

# Spark's JavaUtils.byteStringAs: digits and an optional unit, lower-cased and trimmed.
_BYTES = re.compile(r"([0-9]+)([a-z]+)?")
_BYTE_UNITS = {None: 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
               "g": 1 << 30, "gb": 1 << 30, "t": 1 << 40, "tb": 1 << 40, "p": 1 << 50, "pb": 1 << 50}
# Java's Long.parseLong and Double.parseDouble, in the forms people write.
_LONG = re.compile(r"[+-]?[0-9]+")
_DOUBLE = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[dDfF]?")
_LONG_RANGE = range(-(1 << 63), 1 << 63)
_LOCATION = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:.+")


@cache
def rules() -> dict[str, dict[str, Any]]:
    """Key -> rule (kind, describe, default and the kind's bounds), as the JVM side declares them."""
    return json.loads(resources.files("eqdelete").joinpath("conf_rules.json").read_text())


def _valid(rule: Mapping[str, Any], value: str) -> bool:
    kind = rule["kind"]
    if kind == "boolean":
        return value.strip().lower() in ("true", "false")
    if kind == "choice":
        return value.strip().lower() in rule["values"]
    if kind == "count":
        text = value.strip()
        return bool(_LONG.fullmatch(text)) and int(text) in _LONG_RANGE and int(text) >= rule["min"]
    if kind == "bytes":
        # Spark takes a leading '-' off before parsing the rest; only -1 is allowed below zero.
        negative = value.startswith("-")
        match = _BYTES.fullmatch((value[1:] if negative else value).lower().strip())
        if not match or match.group(2) not in _BYTE_UNITS:
            return False
        size = int(match.group(1)) * _BYTE_UNITS[match.group(2)] * (-1 if negative else 1)
        return size >= 0 or size == -1
    if kind == "fraction":
        text = value.strip()
        return bool(_DOUBLE.fullmatch(text)) and 0 < float(text.rstrip("dDfF")) <= 1
    if kind == "location":
        # Spark trims it first; named whole (a scheme or an absolute path), or empty.
        text = value.strip()
        return text == "" or text.startswith("/") or bool(_LOCATION.fullmatch(text))
    raise AssertionError(f"unknown rule kind {kind!r} in conf_rules.json")


def problem(key: str, value: Any) -> str | None:
    """One line naming the key, the value and what is allowed; None when the value is fine.

    Keys outside ``spark.eqdelete.*`` are not eqdelete's and always pass.
    """
    if not key.startswith(PREFIX):
        return None
    rule = rules().get(key)
    if rule is None:
        return f"unknown key {key}: eqdelete's keys are {', '.join(rules())}"
    text = str(value).lower() if isinstance(value, bool) else str(value)
    if _valid(rule, text):
        return None
    return f"invalid value '{text}' for {key}: must be {rule['describe']}"


def check(options: Mapping[str, Any]) -> None:
    """Raise ValueError for the first bad ``spark.eqdelete.*`` key or value in ``options``."""
    for key, value in options.items():
        message = problem(key, value)
        if message is not None:
            raise ValueError(f"eqdelete: {message}")
