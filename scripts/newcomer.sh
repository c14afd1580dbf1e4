#!/usr/bin/env bash
# The README's first command as a newcomer runs it, in the checkout this
# script lives in: `make run` with the shipped config.example.json (copied
# to config.json by make run), the README's curl pair block exactly as
# written, then its metrics block, its MCP pair and its follow-ups (create,
# add_comment, close_ticket, get_ticket). Checks the answers (created, then
# deduplicated with the same ticket_id; the metrics the README shows; the
# follow-ups as shown, ids and times aside) and stops the server. Needs a checkout with no config.json and no
# tickets.sqlite yet: the README's answers are those of a fresh database.
set -euo pipefail
export GOTOOLCHAIN="${GOTOOLCHAIN:-go1.27.3}"
cd "$(dirname "${BASH_SOURCE[0]}")/.."

for f in config.json tickets.sqlite; do
	if [ -e "$f" ]; then
		echo "newcomer: $f exists; this check needs a clean checkout (a fresh clone, as CI has)" >&2
		exit 1
	fi
done
# listening: a TCP connect, which the server does not count as a callback.
listening() { (exec 3<>/dev/tcp/127.0.0.1/3210) 2>/dev/null; }
if listening; then
	echo "newcomer: something already listens on 127.0.0.1:3210, the README's port" >&2
	exit 1
fi

# block NAME: the fenced block between <!-- NAME:begin --> and <!-- NAME:end -->.
block() {
	sed -n "/<!-- $1:begin -->/,/<!-- $1:end -->/p" README.md | sed '1,2d;$d' | sed '$d'
}

log=$(mktemp)
setsid make run >"$log" 2>&1 &
server=$!
stop() {
	kill -INT -- "-$server" 2>/dev/null || true
	for _ in $(seq 1 40); do kill -0 "$server" 2>/dev/null || break; sleep 0.25; done
	kill -KILL -- "-$server" 2>/dev/null || true
	rm -f config.json tickets.sqlite tickets.sqlite-wal tickets.sqlite-shm mcp-dev-key.pem
}
trap stop EXIT

up=
for _ in $(seq 1 240); do
	if listening; then up=1; break; fi
	kill -0 "$server" 2>/dev/null || break
	sleep 0.5
done
if [ -z "$up" ]; then
	echo "newcomer: make run did not listen on 127.0.0.1:3210; it printed:" >&2
	cat "$log" >&2
	exit 1
fi

answers=$(bash -euo pipefail -c "$(block curl-pair)")
echo "$answers"
first=$(sed -n 1p <<<"$answers")
second=$(sed -n 2p <<<"$answers")
id() { sed -n 's/.*"ticket_id":"\([^"]*\)".*/\1/p' <<<"$1"; }
fail() {
	echo "newcomer: $1" >&2
	echo "server log:" >&2
	cat "$log" >&2
	exit 1
}
[ "$(wc -l <<<"$answers")" -eq 2 ] || fail "the curl pair printed $(wc -l <<<"$answers") lines, want 2"
grep -q '"status":"created"' <<<"$first" && grep -q '"deduplicated":false' <<<"$first" ||
	fail "first answer is not a new ticket: $first"
grep -q '"status":"created"' <<<"$second" && grep -q '"deduplicated":true' <<<"$second" ||
	fail "second answer is not the stored ticket: $second"
[ -n "$(id "$first")" ] && [ "$(id "$first")" = "$(id "$second")" ] ||
	fail "the two answers name different tickets: $first / $second"
# Byte for byte what the README shows, ticket id aside.
shown=$(block curl-output)
[ "${answers//$(id "$first")/$(id "$(sed -n 1p <<<"$shown")")}" = "$shown" ] ||
	fail "the answers differ from the README's (ticket id aside): $answers"

metrics=$(bash -euo pipefail -c "$(block metrics-curl)")
echo "$metrics"
[ "$metrics" = "$(block metrics-output)" ] || fail "the metrics block printed what the README does not show: $metrics"
# The MCP pair: created, then the same ticket deduplicated.
mcp=$(bash -euo pipefail -c "$(block mcp-curl-pair)")
echo "$mcp"
mfirst=$(sed -n 1p <<<"$mcp")
msecond=$(sed -n 2p <<<"$mcp")
[ "$(wc -l <<<"$mcp")" -eq 2 ] || fail "the MCP pair printed $(wc -l <<<"$mcp") lines, want 2"
grep -q '"deduplicated":false}}}$' <<<"$mfirst" || fail "first MCP answer is not a new ticket: $mfirst"
grep -q '"deduplicated":true}}}$' <<<"$msecond" || fail "second MCP answer is not the stored ticket: $msecond"
[ -n "$(id "$mfirst")" ] && [ "$(id "$mfirst")" = "$(id "$msecond")" ] ||
	fail "the two MCP answers name different tickets: $mfirst / $msecond"
mshown=$(block mcp-curl-output)
[ "${mcp//$(id "$mfirst")/$(id "$(sed -n 1p <<<"$mshown")")}" = "$mshown" ] ||
	fail "the MCP answers differ from the README's (ticket id aside): $mcp"
# The follow-ups: four answers shaped as the README shows them (ids and
# times aside), all of one ticket.
shape() { sed -E 's/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/ID/g; s/[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z/TIME/g'; }
follow=$(bash -euo pipefail -c "$(block followups-curl)")
echo "$follow"
[ "$(wc -l <<<"$follow")" -eq 4 ] || fail "the follow-ups block printed $(wc -l <<<"$follow") lines, want 4"
[ "$(shape <<<"$follow")" = "$(block followups-output | shape)" ] ||
	fail "the follow-ups answered other than the README shows (ids and times aside): $follow"
fid=$(id "$(sed -n 1p <<<"$follow")")
[ -n "$fid" ] && [ "$(grep -c "\"ticket_id\":\"$fid\"" <<<"$follow")" -eq 4 ] ||
	fail "the follow-ups' answers do not all name the ticket the first one created: $follow"
echo "newcomer: make run and the README's blocks (callback pair, metrics, MCP pair, follow-ups) answer as the README shows"
