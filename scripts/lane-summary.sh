#!/usr/bin/env bash
# lane-summary.sh LABEL JUNIT: one line a CI log ends with, counted from the
# lane's JUnit testcases: "LABEL: N passed, N failed, N skipped". A missing
# JUnit is a lane that did not report, said as such (exit 1).
set -euo pipefail
label=$1 junit=$2
if [ ! -s "$junit" ]; then
	echo "$label: NOT RUN: no JUnit at $junit"
	exit 1
fi
# Count per testcase: one <testcase> element each, with at most one verdict child.
count() { { grep -oE "$1" "$junit" || true; } | wc -l; } # grep finding none is a count of 0
cases=$(count '<testcase ')
failed=$(count '<(failure|error)[ >]')
skipped=$(count '<skipped[ />]')
echo "$label: $((cases - failed - skipped)) passed, $failed failed, $skipped skipped"
