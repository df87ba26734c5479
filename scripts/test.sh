#!/usr/bin/env bash
# Set up (idempotent) and run the tests of every pair of the support matrix
# (python/eqdelete/matrix.txt): on the primary pair (the newest Spark line with its newest
# Iceberg release) the Scala unit tests (jvm/src/test, through sbt) and the full pytest suite,
# then the smoke suite (tests/test_smoke.py) on every other pair, each in its Spark line's own
# virtualenv, with the query shapes (tests/test_query_shapes.py) once more on the oldest line
# (below); the oldest pair also runs the multi-process test (only there) and the fault tier
# (tests/lakehouse/test_commit_faults.py), and the oldest line's default pair the lakehouse's reads
# (tests/lakehouse/test_object_store.py: s3proxy and Iceberg's REST catalog on loopback; the
# primary pair runs tests/lakehouse whole, Flink writing); then, on each Spark 4.x line, the
# Connect tier (tests/connect) against a real Spark Connect server (its command-line cases on the
# primary line only).
#
#   ./scripts/test.sh                    every pair and the Connect tier (what CI runs)
#   ./scripts/test.sh --pair 3.5:1.11    one pair: the full suite for the primary, else the smoke suite (+ shapes)
#   ./scripts/test.sh -k faults          other arguments go to pytest, on the primary pair only
#                                        (unless --pair names another), without the Scala
#                                        tests (scripts/sbt.sh spark41/test runs those)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

only=
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --pair) only=$2; shift 2 ;;
    --pair=*) only=${1#--pair=}; shift ;;
    *) args+=("$1"); shift ;;
  esac
done

# Each stage's seconds, printed again with the total at the end, where a total past the budget
# warns: CI's limit is 90 minutes, this command's budget 40 on 2 cores with warm caches.
BUDGET_SECONDS=2400
started=$SECONDS
stages=()
status=0
stage() { # name, command...: runs it, records its seconds; a failure fails the run, not the stages after it
  local name=$1 began=$SECONDS
  shift
  echo "[test] $name" >&2
  if ! "$@"; then
    status=1
    echo "[test] FAILED: $name" >&2
    name="$name (FAILED)"
  fi
  stages+=("$((SECONDS - began))|$name")
  echo "[test] $name: $((SECONDS - began)) s" >&2
}
summary() {
  local total=$((SECONDS - started)) entry
  echo "[test] seconds by stage:" >&2
  for entry in "${stages[@]}"; do printf '[test] %6d  %s\n' "${entry%%|*}" "${entry#*|}" >&2; done
  printf '[test] %6d  total\n' "$total" >&2
  if [ "$total" -gt "$BUDGET_SECONDS" ]; then
    echo "[test] WARNING: the tests took $((total / 60)) min, past their budget of $((BUDGET_SECONDS / 60)) min" \
      "(CI's limit is 90): find what grew (pytest --durations) before adding more" >&2
  fi
}

stage "set-up (scripts/setup.sh)" "$root/scripts/setup.sh"
[ "$status" = 0 ] || { summary; exit 1; }

MATRIX=python/eqdelete/matrix.txt
rows=$(sed 's/#.*//' "$MATRIX" | awk 'NF')
primary_line=$(echo "$rows" | tail -1 | awk '{print $1}')
primary_iceberg=$(echo "$rows" | tail -1 | awk '{print $NF}')
oldest="$(echo "$rows" | head -1 | awk '{print $1 ":" $3}')"
oldest_line=${oldest%%:*}
primary="$primary_line:$primary_iceberg"
if [ -z "$only" ] && [ ${#args[@]} -gt 0 ]; then only=$primary; fi

scala_tests() { "$root/scripts/sbt.sh" "spark${1//./}/test" >&2; }

pairs=()
while read -r line scala icebergs; do
  for iceberg in $icebergs; do
    version=${iceberg%.0}  # 1.11.0 -> 1.11, as --pair names it
    pairs+=("$line:$iceberg:$version")
  done
done <<< "$rows"

# The query shapes run through every shim of the extension (jvm/src/main: a Spark one for 3.5 and
# one for 4.x, an Iceberg one for Spark 3.5-4.0 and one for 4.1) and on two Iceberg releases, once
# each (CI time, 2 cores): the primary pair's full suite has them (the 4.x and 4.1 shims, the
# newest release), and the oldest line on its newest release before the primary's (the 3.5 and
# 3.5-4.0 shims). Today: 4.1 on 1.12.0, 3.5 on 1.11.0. Spark 4.0 shares its shims with those two;
# it and the other pairs run the smoke suite, whose reads go through the same rule and the same
# Iceberg scan API of their release.
shapes_pairs=""
read -r _ _ oldest_releases <<< "$(echo "$rows" | head -1)"
for iceberg in $oldest_releases; do
  [ "$iceberg" = "$primary_iceberg" ] || shapes_pairs="$oldest_line:$iceberg"
done

# The stages after set-up run side by side, LANES at a time, then the full suite alone over WORKERS
# pytest-xdist workers. 2 cores, yet three of each: every test JVM compiles with C1 only
# (tests/conftest.py), so no two C2 compilers fight over the cores, and many tests wait on time
# (Flink's checkpoints, maintain's intervals, a stream's triggers, a Connect server's answers, a
# command's new JVM starting), leaving a core idle that a third fills (the full suite: 1,350 s on
# three workers against 1,427-1,514 s on two, 2026-12-06; the stages 807 s on three lanes against 972 s
# on two, 2026-12-07, the CPU 95% busy). The stages carrying more than the smoke
# suite (the pairs' extra tiers, the Scala tests, the Connect tiers) go first, the smoke-only pairs
# last.
LANES=${EQDELETE_TEST_LANES:-3}
WORKERS=${EQDELETE_TEST_WORKERS:-$((LANES > 1 ? 3 : 1))}
queued=()   # "name|command, quoted": stages that carry more than the smoke suite, Scala, Connect
smoke=()    # the smoke-only pairs, queued last (the shortest)
queue() { # list, name, command...
  local -n list=$1
  local name=$2
  shift 2
  list+=("$name|$(printf '%q ' "$@")")
}
full=()
ran=0
for entry in "${pairs[@]}"; do
  IFS=: read -r line iceberg short <<< "$entry"
  pair="$line:$short"
  if [ -n "$only" ] && [ "$only" != "$pair" ] && [ "$only" != "$line:$iceberg" ]; then continue; fi
  ran=$((ran + 1))
  venv=.venv
  [ "$line" = "$primary_line" ] || venv="build/venvs/spark-$line"
  if [ "$line:$iceberg" = "$primary_line:$primary_iceberg" ]; then
    tests=()  # everything under tests/
    if [ ${#args[@]} -eq 0 ]; then
      # The multi-process test runs on the oldest pair (Scala 2.12's closures, the line most
      # apart); once is what it needs (CI time). Named, it runs here too. The whole suite over
      # WORKERS workers; the lakehouse tier on one of them (tests/conftest.py groups it).
      tests=(--ignore=tests/test_multiprocess.py)
      [ "$WORKERS" -le 1 ] || tests+=(-n "$WORKERS" --dist loadscope)
      queue queued "Spark $line: Scala unit tests" scala_tests "$line"
    fi
    full=("Spark $line + Iceberg $iceberg: full suite" env EQDELETE_TEST_ICEBERG="$iceberg" "$venv/bin/python" -m pytest
      "${tests[@]}" "${args[@]}")
    continue
  fi
  tests=(tests/test_smoke.py)
  kind="smoke suite"
  read -r -a releases <<< "$(echo "$rows" | awk -v l="$line" '($1 "") == (l "") {$1 = $2 = ""; print}')"
  case " $shapes_pairs " in
    *" $line:$iceberg "*) tests+=(tests/test_query_shapes.py); kind="smoke suite and query shapes" ;;
  esac
  # The oldest pair: the multi-process test, and the fault tier, whose commits Iceberg 1.10
  # retries and cleans up otherwise than later releases; its command-line cases, the same JVM
  # code in a process of their own, on the primary pair only (CI time).
  if [ "$line:$short" = "${oldest%.0}" ]; then
    tests+=(tests/test_multiprocess.py tests/lakehouse/test_commit_faults.py -m "not command_line")
    kind="$kind, the multi-process test and the fault tier"
  fi
  # The lakehouse's reads (REST catalog, object store) on Spark 3.5 with its newest Iceberg too;
  # Flink's tables, the live test and the benchmark on the primary pair only (CI time). There too
  # the changes across schema changes, on the line whose ANSI mode is off by default (a narrowing
  # cast would wrap there, not fail).
  if [ "$line" = "$oldest_line" ] && [ "$iceberg" = "${releases[${#releases[@]}-1]}" ]; then
    tests+=(tests/lakehouse/test_object_store.py tests/test_changes_evolution.py)
    kind="$kind, the lakehouse's reads, the changes across schema changes"
  fi
  list=queued
  [ "$kind" != "smoke suite" ] || list=smoke
  queue "$list" "Spark $line + Iceberg $iceberg: $kind" env EQDELETE_TEST_ICEBERG="$iceberg" "$venv/bin/python" -m pytest \
    "${tests[@]}" "${args[@]}"
done
# The Connect tier: a real Spark Connect server per Spark 4.x line (its default Iceberg), the
# public functions and CLI over it, compared with a classic session. Its own pytest process:
# pyspark cannot hold classic and Connect sessions in one.
if [ -z "$only" ]; then
  while read -r line scala icebergs; do
    [ "${line%%.*}" -ge 4 ] || continue
    venv=.venv
    [ "$line" = "$primary_line" ] || venv="build/venvs/spark-$line"
    # The command line over Connect (a Python client process per command, the same on every
    # line) and apply_changes (a procedure call, the same JVM code) on the primary line only (CI
    # time); the rest of the tier on each 4.x line.
    connect_args=()
    [ "$line" = "$primary_line" ] || connect_args=(-k "not test_cli_over_connect and not test_apply_changes_over_connect")
    queue queued "Spark $line: Connect tier" "$venv/bin/python" -m pytest tests/connect "${connect_args[@]}"
  done <<< "$rows"
fi

lanes() { # runs queued stages (name|command) LANES at a time; each stage's output printed whole when it ends
  local dir
  dir=$(mktemp -d)
  lane() {
    local i entry name began rc
    for i in "${!jobs[@]}"; do
      mkdir "$dir/claim.$i" 2>/dev/null || continue  # the first lane to get here runs it
      entry=${jobs[$i]}
      name=${entry%%|*}
      began=$SECONDS
      rc=0
      eval "${entry#*|}" > "$dir/$i.log" 2>&1 || rc=$?
      echo "$i|$((SECONDS - began))|$rc" >> "$dir/done"
      {
        flock 9
        echo "[test] $name"
        cat "$dir/$i.log"
        [ "$rc" = 0 ] || echo "[test] FAILED: $name"
        echo "[test] $name: $((SECONDS - began)) s"
      } 9> "$dir/print.lock" >&2
    done
  }
  local jobs=("$@") n
  if [ "$LANES" -le 1 ] || [ $# -le 1 ]; then  # one at a time, its output as it comes
    for entry in "$@"; do eval "stage $(printf '%q' "${entry%%|*}") ${entry#*|}"; done
    rm -rf "$dir"
    return
  fi
  local lanes_began=$SECONDS
  for ((n = 1; n < LANES; n++)); do lane & done
  lane
  wait
  local i secs rc
  while IFS='|' read -r i secs rc; do
    entry=${jobs[$i]}
    name=${entry%%|*}
    if [ "$rc" != 0 ]; then status=1; name="$name (FAILED)"; fi
    stages+=("$secs|$name (side by side)")
  done < <(sort -t'|' -n -k1 "$dir/done")
  stages+=("$((SECONDS - lanes_began))|the stages above, side by side on $LANES lanes")
  rm -rf "$dir"
}
[ $((${#queued[@]} + ${#smoke[@]})) -eq 0 ] || lanes "${queued[@]}" "${smoke[@]}"
[ ${#full[@]} -eq 0 ] || stage "${full[@]}"
summary
if [ "$ran" = 0 ]; then
  echo "[test] no pair $only in the support matrix: $(printf '%s ' "${pairs[@]}" | sed 's/:[0-9.]*:/:/g')" >&2
  exit 2
fi
exit $status
