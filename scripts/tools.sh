#!/usr/bin/env bash
# Installs the test/CI tools into <repo>/.cache (git-ignored). Idempotent:
# a second run only checks. Needs only Go, Java 17 and Node/npm.
#
#   .cache/bin/                 golangci-lint, govulncheck, aws-lambda-rie:
#                               the `tool` directives of tools/go.mod, built
#                               with `go build` (versions and checksums live in
#                               tools/go.mod and tools/go.sum; the build cache
#                               makes a rebuild take about a second)
#   .cache/dynamodb-local/      DynamoDB Local (jar + DynamoDBLocal_lib), taken
#                               from the amplify-dynamodb-simulator npm package
#   .cache/vulndb/              offline Go vulnerability database (govulncheck -db file://...)
#   .cache/mcp-ts/              the official TypeScript MCP SDK's clients, for the MCP
#                               door's tests: `npm ci` of tools/mcp-ts (versions and
#                               integrity hashes pinned in its package-lock.json)
#
# Only what the go command cannot fetch as a Go tool is pinned here.
set -euo pipefail

export GOTOOLCHAIN="${GOTOOLCHAIN:-go1.27.3}"

# Pinned versions of what is not a Go tool.
DDB_SIM_VERSION="2.9.30" # amplify-dynamodb-simulator; ships DynamoDB Local 1.25.1
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
# The Go tools: every `tool` of tools/go.mod, built into .cache/bin. go build
# is incremental, so this is cheap when nothing changed; tools/ is its own
# module so that the linters' dependencies never enter the product's go.mod.
install_go_tools() {
	need go
	(cd "$ROOT/tools" && CGO_ENABLED=0 go build -o "$BIN/" tool)
	(cd "$ROOT/tools" && go list -f '{{.ImportPath}}' tool) | while read -r pkg; do
		log "go tool: $BIN/${pkg##*/}"
	done
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
# The TypeScript MCP clients: tools/mcp-ts's package.json and lock, installed
# with npm ci (exact versions, checked against the lock's integrity hashes).
install_mcp_ts() {
	local dest="$CACHE/mcp-ts" src="$ROOT/tools/mcp-ts" sum
	sum="$(cat "$src/package.json" "$src/package-lock.json" | cksum | cut -d' ' -f1)"
	if [[ -f "$dest/.lock-$sum" && -d "$dest/node_modules/@modelcontextprotocol/client" ]]; then
		log "mcp-ts: already present in $dest (skip)"
		return
	fi
	need npm
	need node
	rm -rf "$dest"
	mkdir -p "$dest"
	cp "$src/package.json" "$src/package-lock.json" "$dest/"
	(cd "$dest" && npm ci --no-audit --no-fund --silent >/dev/null)
	touch "$dest/.lock-$sum"
	log "mcp-ts: installed $(cd "$dest" && node -p "const v = (p) => JSON.parse(require('fs').readFileSync('node_modules/' + p + '/package.json')).version; v('@modelcontextprotocol/client') + ' (client), ' + v('@modelcontextprotocol/sdk') + ' (sdk)'")"
}

# ---------------------------------------------------------------------------
log "cache: $CACHE"
step dynamodb-local install_dynamodb_local
step go-tools install_go_tools
step vulndb install_vulndb
step mcp-ts install_mcp_ts
log "all tools ready"
