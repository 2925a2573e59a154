#!/usr/bin/env bash
# lane-summary.sh LABEL JUNIT: one line a CI log ends with, counted from the
# lane's JUnit specs: "LABEL: N passed, N failed, N skipped", then the
# failures' messages from the report beside it (conformance.md's last
# section), so that the end of a long log says why. A missing JUnit is a
# lane that did not report, said as such (exit 1).
set -euo pipefail
label=$1 junit=$2
if [ ! -s "$junit" ]; then
	echo "$label: NOT RUN: no JUnit at $junit"
	exit 1
fi
# Count the specs (Ginkgo's "[It]" testcases, not its suite-level nodes) by
# the status attribute Ginkgo gives each.
count() { { grep -oE "<testcase name=\"\\[It\\][^\"]*\"[^>]* status=\"$1\"" "$junit" || true; } | wc -l; } # none is a count of 0
passed=$(count passed)
failed=$(count '(failed|panicked|timedout|interrupted|aborted)')
skipped=$(count '(skipped|pending)')
report=$(dirname "$junit")/conformance.md
# A lane on an access-mode trunk (report.Environment.AccessTrunk) says so
# in the line a CI log ends with: br100 enslaved the uplink itself.
trunk=""
if [ -s "$report" ] && grep -q '^| trunk | untagged' "$report"; then
	trunk=" (on an access-mode trunk: uplink in br100, no uplink.100 on this kernel; the tag claims skipped)"
fi
echo "$label: $passed passed, $failed failed, $skipped skipped$trunk"
# The report's failure section (report.FailuresHeading), at most 60 lines.
if [ -s "$report" ] && grep -q '^## Failures$' "$report"; then
	sed -n '/^## Failures$/,$p' "$report" | head -n 60
fi
