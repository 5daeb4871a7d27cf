#!/usr/bin/env bash
# fuzz.sh: run every Fuzz* target in the module for FUZZTIME each (default 30s).
# go test -fuzz takes one package and one target at a time, so this finds them:
# a line `func FuzzName(f *testing.F)` in a _test.go file. Plain `go test` already
# runs each target's seed corpus (testdata/fuzz/ included); this goes further.
# New crashers land in the package's testdata/fuzz/ as regression seeds.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-30s}

n=0
failed=()
while read -r dir pkg; do
	while read -r name; do
		n=$((n + 1))
		printf '\n=== fuzz %s %s for %s\n' "$pkg" "$name" "$FUZZTIME"
		if ! "$GO" test -run='^$' -fuzz="^${name}\$" -fuzztime="$FUZZTIME" "$pkg"; then
			failed+=("$pkg $name")
		fi
	done < <(cat "$dir"/*_test.go 2>/dev/null |
		sed -nE 's/^func (Fuzz[A-Za-z0-9_]*)\([A-Za-z_][A-Za-z0-9_]* \*testing\.F\).*/\1/p' | sort -u)
done < <("$GO" list -f '{{.Dir}} {{.ImportPath}}' ./...)

printf '\n=== fuzz summary: %d targets, %d failed\n' "$n" "${#failed[@]}"
if ((${#failed[@]} > 0)); then
	printf 'FAIL %s\n' "${failed[@]}"
	exit 1
fi
