#!/usr/bin/env bash
# test.sh: run the broker's tests by layer, as the Makefile's test targets do.
#
#   scripts/test.sh all     install-deps, go vet, -race tests of every package but
#                           ./test/..., then the black-box tests in ./test/...
#                           (`make test`, `.ci/run`)
#   scripts/test.sh unit    every package but ./test/..., with -short and without
#                           the real-ZooKeeper tests (named TestZK...)
#   scripts/test.sh race    every package but ./test/..., with -race
#   scripts/test.sh integ   install-deps, then the TestZK... tests with -race. They
#                           start their own ZooKeeper (internal/zktest), or use
#                           BROKER_TEST_ZK=host:port when it is set
#   scripts/test.sh e2e     install-deps, then ./test/... (no -race: it runs processes)
#   scripts/test.sh compose scripts/compose-test.sh: images, the docker-compose
#                           cluster, failover with assertions (needs docker)
#
# `all` ends with the compose stage when docker is usable (COMPOSE_TEST=0 skips
# it); it says why when it skips it.
#
# Every stage runs even after one fails; the exit status is non-zero if any
# failed. The last lines count the test packages that passed and failed.
# GO_TEST_FLAGS adds flags to every go test (e.g. GO_TEST_FLAGS=-v).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
GO=${GO:-go}
TIMEOUT=${TEST_TIMEOUT:-25m}
read -ra extra <<<"${GO_TEST_FLAGS:-}"

log=$(mktemp)
trap 'rm -f "$log"' EXIT
passed=0
failed=0
declare -a results=()

# stage NAME CMD...: run one stage, echoing its output, and record the result.
stage() {
	local name=$1 rc=0 ok fail
	shift
	printf '\n=== %s: %s\n' "$name" "$*"
	"$@" 2>&1 | tee "$log" || rc=$?
	ok=$(grep -cE '^ok[[:space:]]' "$log" || true)
	fail=$(grep -cE '^FAIL[[:space:]]+[^[:space:]]' "$log" || true)
	passed=$((passed + ok))
	failed=$((failed + fail))
	if ((rc != 0)); then
		results+=("FAIL  $name (exit $rc)")
		((fail > 0)) || failed=$((failed + 1))
	else
		results+=("ok    $name")
	fi
}

module=$($GO list -m)
# Packages other than the black-box tests under ./test/.
mapfile -t pkgs < <($GO list -e ./... | grep -vE "^$module/test(/|$)")
# The black-box test packages, if any exist yet.
mapfile -t e2e_pkgs < <($GO list -e ./test/... 2>/dev/null || true)

deps() { stage install-deps "$ROOT/scripts/install-deps.sh"; }
race() { CGO_ENABLED=1 stage "$1" "$GO" test -race -count=1 -timeout "$TIMEOUT" "${@:2}" "${extra[@]}" "${pkgs[@]}"; }
e2e() {
	if ((${#e2e_pkgs[@]} == 0)); then
		printf '\n=== e2e: no packages under ./test yet\n'
		results+=("skip  e2e (no packages under ./test)")
		return
	fi
	stage e2e "$GO" test -count=1 -timeout "$TIMEOUT" "${extra[@]}" "${e2e_pkgs[@]}"
}

# compose_stage: scripts/compose-test.sh, when docker and a compose command work.
compose_stage() {
	local why=''
	if ! command -v docker >/dev/null 2>&1; then
		why="docker is not installed"
	elif ! docker info >/dev/null 2>&1; then
		why="the docker engine does not answer (docker info failed)"
	elif ! docker compose version >/dev/null 2>&1 && ! command -v docker-compose >/dev/null 2>&1; then
		why="neither 'docker compose' nor 'docker-compose' is installed"
	fi
	if [[ -n $why ]]; then
		printf '\n=== compose: skipped: %s\n' "$why"
		results+=("skip  compose ($why)")
		return
	fi
	stage compose "$ROOT/scripts/compose-test.sh"
}

case ${1:-all} in
all)
	deps
	stage vet "$GO" vet ./...
	race "unit+integ (-race)"
	e2e
	if [[ ${COMPOSE_TEST:-1} == 1 ]]; then
		compose_stage
	else
		printf '\n=== compose: skipped: COMPOSE_TEST=0 (scripts/compose-test.sh, make compose-test)\n'
		results+=("skip  compose (COMPOSE_TEST=0)")
	fi
	;;
compose) compose_stage ;;
unit) stage unit "$GO" test -count=1 -short -skip '^TestZK' -timeout "$TIMEOUT" "${extra[@]}" "${pkgs[@]}" ;;
race) race "race" ;;
integ)
	deps
	race integ -run '^TestZK'
	;;
e2e)
	deps
	e2e
	;;
*)
	printf 'usage: %s [all|unit|race|integ|e2e|compose]\n' "$0" >&2
	exit 2
	;;
esac

printf '\n=== summary\n'
printf '%s\n' "${results[@]}"
printf 'packages: %d passed, %d failed\n' "$passed" "$failed"
((failed == 0))
