#!/usr/bin/env bash
# mutation.sh: mutation testing (gremlins v0.6.0) of the packages that hold
# agentd's rules, each package mutated against its own tests only, and a
# table of the results.
#
#   scripts/mutation.sh [-w N] [--timeout-coefficient K] [--diff REF] [-n] [UNIT...]
#
#   -w N        gremlins workers (default 1: mutation testing is heavy)
#   --timeout-coefficient K
#               gremlins waits K times the tests' normal run time before
#               it calls a mutant "timed out" (gremlins' default: 3); on a
#               loaded machine use e.g. 10
#   --diff REF  mutate only the lines changed since the git ref REF
#   -n          dry run: list the mutants, run none (gremlins still runs
#               the unit's tests once, for their coverage)
#   UNIT        what to mutate (default: all of them):
#                 confirm, links, schedule, mcp (mcp/*.go only: not its test
#                 server), tools (tools/*.go only),
#                 tools/callcontext, tools/direct, tools/registry,
#                 tools/gofunc, loop (its governance files only: grant.go,
#                 approval.go, decide.go, links.go, remind.go, deadline.go),
#                 sqlstore (the store's logic, with the store contract,
#                 storetest against SQLite, as the killer: the unit sets
#                 AGENTD_STORE_CONTRACT=1 for sqlstore's TestContract),
#                 sqlite (SQLite's own files: group commit, statements;
#                 its tests, which run storetest, as the killers)
#
# Scoping: gremlins mutates every non-test .go file under the directory it
# is given and runs, for each mutant, `go test` of the mutant's package
# only. So a directory with sub-packages (tools, mcp) excludes them (-E '/'),
# and loop excludes by name every file that is not a governance file (the
# list is read at run time, so a new loop file is excluded too).
#
# Columns: killed, lived (a test should have failed), not covered (no test
# reaches the line), timed out (the tests hung: the mutant was caught, but
# gremlins counts it neither killed nor lived), efficacy = killed / (killed + lived),
# coverage = (killed + lived) / (killed + lived + not covered).
# gremlins' own output is kept in $MUTATION_OUT (default a temporary
# directory) as UNIT.txt and UNIT.json.
set -euo pipefail

workers=1
coefficient=""
diff_ref=""
dry=""
units=()
while [ $# -gt 0 ]; do
	case "$1" in
	-w) workers="${2:?-w needs a number}"; shift 2 ;;
	--timeout-coefficient) coefficient="${2:?--timeout-coefficient needs a number}"; shift 2 ;;
	--diff) diff_ref="${2:?--diff needs a git ref}"; shift 2 ;;
	-n) dry=1; shift ;;
	-h | --help) sed -n '2,34p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	-*) echo "mutation.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
	*) units+=("$1"); shift ;;
	esac
done
case "$workers" in '' | *[!0-9]* | 0) echo "mutation.sh: -w wants a positive number, got '$workers'" >&2; exit 2 ;; esac
case "$coefficient" in *[!0-9]* | 0) echo "mutation.sh: --timeout-coefficient wants a positive number, got '$coefficient'" >&2; exit 2 ;; esac
if [ ${#units[@]} -eq 0 ]; then
	units=(confirm links schedule mcp tools tools/callcontext tools/direct tools/registry tools/gofunc loop sqlstore sqlite)
fi

cd "$(dirname "$0")/.."

gremlins=$(command -v gremlins || true)
if [ -z "$gremlins" ] && [ -x "$(go env GOPATH)/bin/gremlins" ]; then
	gremlins="$(go env GOPATH)/bin/gremlins"
fi
if [ -z "$gremlins" ]; then
	echo "mutation.sh: installing gremlins v0.6.0 (go install, not in go.mod)" >&2
	GOFLAGS=-mod=mod go install github.com/go-gremlins/gremlins/cmd/gremlins@v0.6.0
	gremlins="$(go env GOPATH)/bin/gremlins"
fi

out="${MUTATION_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/agentd-mutation.XXXXXX")}"
mkdir -p "$out"

# governance lists the loop files the loop unit mutates.
governance="grant.go approval.go decide.go links.go remind.go deadline.go"

# excludes prints the gremlins -E options that scope unit (paths are
# relative to the unit's directory).
excludes() {
	case "$1" in
	tools | mcp) printf '%s\n' -E / ;;
	loop)
		local others="" f name
		for f in loop/*.go; do
			name=${f#loop/}
			case "$name" in *_test.go) continue ;; esac
			case " $governance " in *" $name "*) continue ;; esac
			others="$others|${name%.go}"
		done
		if [ -n "$others" ]; then
			printf '%s\n' -E "^(${others#|})\\.go\$"
		fi
		;;
	esac
}

# field prints the number after "label: " in a gremlins report (0 if none).
field() {
	local v
	v=$(sed 's/\x1b\[[0-9;]*m//g' "$2" | grep -o "$1: [0-9.]*" | tail -1 | sed 's/.*: //')
	echo "${v:-0}"
}

rows=()
status=0
for unit in "${units[@]}"; do
	dir="$unit"
	if [ ! -d "$dir" ]; then
		echo "mutation.sh: no package directory $dir" >&2
		exit 2
	fi
	name=${unit//\//_}
	args=(unleash --workers "$workers" --output "$out/$name.json")
	while IFS= read -r a; do args+=("$a"); done < <(excludes "$unit")
	if [ -n "$coefficient" ]; then
		args+=(--timeout-coefficient "$coefficient")
	fi
	if [ -n "$diff_ref" ]; then
		args+=(--diff "$diff_ref")
	fi
	if [ -n "$dry" ]; then
		args+=(--dry-run)
	fi
	echo "== $unit: gremlins ${args[*]} ./$dir" >&2
	if ! AGENTD_STORE_CONTRACT=1 "$gremlins" "${args[@]}" "./$dir" >"$out/$name.txt" 2>&1; then
		echo "mutation.sh: gremlins failed on $unit; see $out/$name.txt" >&2
		tail -5 "$out/$name.txt" >&2
		status=1
		continue
	fi
	killed=$(field Killed "$out/$name.txt")
	lived=$(field Lived "$out/$name.txt")
	uncovered=$(field "Not covered" "$out/$name.txt")
	timedout=$(field "Timed out" "$out/$name.txt")
	reached=$((killed + lived))
	efficacy=n/a
	coverage=n/a
	if [ "$reached" -gt 0 ]; then
		efficacy=$(awk -v k="$killed" -v r="$reached" 'BEGIN { printf "%.1f", 100 * k / r }')
	fi
	if [ $((reached + uncovered)) -gt 0 ]; then
		coverage=$(awk -v r="$reached" -v n="$uncovered" 'BEGIN { printf "%.1f", 100 * r / (r + n) }')
	fi
	rows+=("$unit $killed $lived $uncovered $timedout $efficacy $coverage")
done

printf '%-18s %7s %6s %12s %10s %11s %11s\n' package killed lived "not covered" "timed out" "efficacy %" "coverage %"
for r in "${rows[@]}"; do
	# shellcheck disable=SC2086
	printf '%-18s %7s %6s %12s %10s %11s %11s\n' $r
done
echo "gremlins output: $out" >&2
exit "$status"
