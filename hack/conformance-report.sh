#!/usr/bin/env bash
# conformance-report.sh: copies the report of the last `make conformance`
# (_output/conformance-report.yaml) into the layout of the upstream
# repository's conformance/reports directory, so that it can be submitted:
#
#   conformance/reports/<gatewayAPIVersion>/portico/<channel>-<version>-<mode>-report.yaml
#
# The copy is the report as the suite wrote it, without the comment header
# Portico adds (the tests run, skipped and not run are in the report's
# statistics and in docs/conformance.md). The directory's README.md says
# how to reproduce it. Any previous report of the same directory is
# replaced: one report per Gateway API version.
set -euo pipefail
cd "$(dirname "$0")/.."
src=${1:-_output/conformance-report.yaml}
[ -s "$src" ] || { echo "conformance-report: $src is missing: run make conformance first" >&2; exit 1; }
field() { grep -m1 -E "^$1: " "$src" | sed -E "s/^$1: \"?([^\"]*)\"?$/\1/"; }
gw=$(field gatewayAPIVersion)
channel=$(field gatewayAPIChannel)
mode=$(field mode)
version=$(grep -m1 -E '^  version: ' "$src" | sed -E 's/^  version: "?([^"]*)"?$/\1/')
[ -n "$gw" ] && [ -n "$channel" ] && [ -n "$mode" ] && [ -n "$version" ] ||
	{ echo "conformance-report: $src lacks gatewayAPIVersion, gatewayAPIChannel, mode or implementation.version" >&2; exit 1; }
if grep -qE '^\s+Failed: [1-9]' "$src"; then
	echo "conformance-report: $src has failed tests; not copying it" >&2
	exit 1
fi
dir=conformance/reports/$gw/portico
mkdir -p "$dir"
rm -f "$dir"/*-report.yaml
out=$dir/$channel-$version-$mode-report.yaml
grep -v '^#' "$src" >"$out"
echo "conformance-report: $out"
