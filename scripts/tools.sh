#!/usr/bin/env bash
# Installs the test/CI tools into <repo>/.cache (git-ignored). Idempotent:
# every step is skipped when its output already exists, so a second run is
# fast. Needs only Go, Java 17 and Node/npm on the machine.
#
#   .cache/dynamodb-local/      DynamoDB Local (jar + DynamoDBLocal_lib), taken
#                               from the amplify-dynamodb-simulator npm package
#   .cache/bin/aws-lambda-rie   Lambda Runtime Interface Emulator
#   .cache/bin/golangci-lint    golangci-lint v2
#   .cache/bin/govulncheck      govulncheck
#   .cache/vulndb/              offline Go vulnerability database (govulncheck -db file://...)
set -euo pipefail

export GOTOOLCHAIN="${GOTOOLCHAIN:-go1.27.3}"

# Pinned versions.
DDB_SIM_VERSION="2.9.30" # amplify-dynamodb-simulator; ships DynamoDB Local 1.25.1
RIE_VERSION="v0.0.0-20261030222936-bef5c4ba774d"
GOLANGCI_LINT_VERSION="v2.15.0"
GOVULNCHECK_VERSION="v1.9.0"
VULNDB_VERSION="v0.0.0-20261105234957-e22db6528018"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if top="$(git -C "$ROOT" rev-parse --show-toplevel 2>/dev/null)"; then
	ROOT="$top"
fi
CACHE="$ROOT/.cache"
BIN="$CACHE/bin"
mkdir -p "$BIN"

log() { printf '[tools] %s\n' "$*" >&2; }

TMPDIRS=()
cleanup() {
	local d
	for d in "${TMPDIRS[@]}"; do
		chmod -R u+w "$d" 2>/dev/null || true
		rm -rf "$d"
	done
}
trap cleanup EXIT

# step NAME FUNC: runs FUNC and prints how long it took.
step() {
	local name="$1" fn="$2" start end
	start=$(date +%s)
	"$fn"
	end=$(date +%s)
	log "$name: done in $((end - start))s"
}

need() {
	command -v "$1" >/dev/null 2>&1 || {
		log "ERROR: '$1' not found on PATH"
		exit 1
	}
}

# ---------------------------------------------------------------------------
install_dynamodb_local() {
	local dest="$CACHE/dynamodb-local"
	if [[ -f "$dest/DynamoDBLocal.jar" && -d "$dest/DynamoDBLocal_lib" && -f "$dest/.version-$DDB_SIM_VERSION" ]]; then
		log "dynamodb-local: already present in $dest (skip)"
		return
	fi
	need npm
	need java
	log "dynamodb-local: npm pack amplify-dynamodb-simulator@$DDB_SIM_VERSION"
	local tmp
	tmp="$(mktemp -d)"
	TMPDIRS+=("$tmp")
	(cd "$tmp" && npm pack --silent "amplify-dynamodb-simulator@$DDB_SIM_VERSION" >/dev/null)
	tar -xzf "$tmp"/amplify-dynamodb-simulator-*.tgz -C "$tmp"
	if [[ ! -f "$tmp/package/emulator/DynamoDBLocal.jar" ]]; then
		log "ERROR: package has no emulator/DynamoDBLocal.jar"
		exit 1
	fi
	rm -rf "$dest"
	mkdir -p "$(dirname "$dest")"
	cp -R "$tmp/package/emulator" "$dest"
	touch "$dest/.version-$DDB_SIM_VERSION"
	log "dynamodb-local: installed $(cd "$dest" && java -jar DynamoDBLocal.jar -version 2>/dev/null | tr '\n' ' ')"
}

# ---------------------------------------------------------------------------
# go_tool NAME PKG@VERSION: go install into .cache/bin unless the binary is
# there with a matching version stamp.
go_tool() {
	local name="$1" pkg="$2" stamp="$BIN/.$1.version"
	if [[ -x "$BIN/$name" && -f "$stamp" && "$(cat "$stamp")" == "$pkg" ]]; then
		log "$name: already installed (skip)"
		return
	fi
	need go
	log "$name: go install $pkg"
	GOBIN="$BIN" CGO_ENABLED=0 go install "$pkg"
	echo "$pkg" >"$stamp"
}

install_rie() {
	go_tool aws-lambda-rie "github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@$RIE_VERSION"
}

install_golangci_lint() {
	go_tool golangci-lint "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$GOLANGCI_LINT_VERSION"
}

install_govulncheck() {
	go_tool govulncheck "golang.org/x/vuln/cmd/govulncheck@$GOVULNCHECK_VERSION"
}

# ---------------------------------------------------------------------------
install_vulndb() {
	local dest="$CACHE/vulndb" marker="$CACHE/vulndb/.version-$VULNDB_VERSION"
	if [[ -f "$dest/index/db.json" && -f "$marker" ]]; then
		log "vulndb: already built in $dest (skip)"
		return
	fi
	need go
	need git
	log "vulndb: go mod download golang.org/x/vulndb@$VULNDB_VERSION"
	local dir tmp
	tmp="$(mktemp -d)"
	TMPDIRS+=("$tmp")
	# Run outside the project's module so its go.mod/go.sum are not touched.
	dir="$(cd "$tmp" && go mod download -json "golang.org/x/vulndb@$VULNDB_VERSION" |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
	if [[ -z "$dir" || ! -d "$dir" ]]; then
		log "ERROR: could not download golang.org/x/vulndb@$VULNDB_VERSION"
		exit 1
	fi
	cp -R "$dir/." "$tmp/repo"
	chmod -R u+w "$tmp/repo"
	log "vulndb: making a throwaway git repo for gendb"
	git -C "$tmp/repo" init -q
	git -C "$tmp/repo" add -A
	git -C "$tmp/repo" -c user.name=tools -c user.email=tools@localhost \
		-c commit.gpgsign=false commit -q -m "vulndb $VULNDB_VERSION"
	log "vulndb: go run ./cmd/gendb (about a minute)"
	rm -rf "$dest.tmp"
	(cd "$tmp/repo" && go run ./cmd/gendb -repo . -out "$dest.tmp")
	if [[ ! -f "$dest.tmp/index/db.json" ]]; then
		log "ERROR: gendb produced no index/db.json"
		exit 1
	fi
	touch "$dest.tmp/.version-$VULNDB_VERSION"
	rm -rf "$dest"
	mv "$dest.tmp" "$dest"
}

# ---------------------------------------------------------------------------
log "cache: $CACHE"
step dynamodb-local install_dynamodb_local
step aws-lambda-rie install_rie
step golangci-lint install_golangci_lint
step govulncheck install_govulncheck
step vulndb install_vulndb
log "all tools ready"
