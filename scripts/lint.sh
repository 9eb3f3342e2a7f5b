#!/usr/bin/env bash
# Static checks beyond go vet: gofmt, README.md's package table against
# `go list` (scripts/pkgtable), and staticcheck at a pinned version,
# installed on first use with `go install` into a cache directory outside
# the repository (STACKTOP_TOOLS; by default stacktop-tools beside Go's
# build cache, usually ~/.cache/stacktop-tools), so the module's go.mod does
# not carry it. Called
# from scripts/test.sh; a cold run builds staticcheck once (about a minute),
# later runs take seconds. Fails on any finding.
set -euo pipefail
cd "$(dirname "$0")/.."

STATICCHECK_VERSION=v0.8.2 # staticcheck 2026.2.2
tools="${STACKTOP_TOOLS:-$(dirname "$(go env GOCACHE)")/stacktop-tools}"
bin="$tools/staticcheck-$STATICCHECK_VERSION"

echo "== gofmt"
unformatted="$(gofmt -l .)"
if [ -n "$unformatted" ]; then
	echo "gofmt -l lists files that are not formatted; run gofmt -w on them:" >&2
	echo "$unformatted" >&2
	exit 1
fi

echo "== README package table"
go run ./scripts/pkgtable -check

if [ ! -x "$bin/staticcheck" ]; then
	echo "== installing staticcheck $STATICCHECK_VERSION"
	mkdir -p "$bin"
	GOBIN="$bin" go install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION"
fi
echo "== staticcheck"
"$bin/staticcheck" ./...
