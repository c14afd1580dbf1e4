// Package operator is the operator's command on a local configuration's
// store (cmd/deliveries): list, show, retry and resolve deliveries, and
// check the destination's lookups.
package operator

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/app/destination"
	"github.com/aivax-examples/idempotent-callback/internal/app/localstore"
	"github.com/aivax-examples/idempotent-callback/internal/config"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/tracing"
	"github.com/aivax-examples/idempotent-callback/internal/urls"
)

// DeliveriesUsage is the operator's command's synopsis.
const DeliveriesUsage = `usage: deliveries [-config config.json] COMMAND
  list    [-state unknown|failed|pending|delivering|delivered] [-limit 100] [-json]
          tickets in a delivery state (default unknown), by ticket id; -json
          writes one JSON object per line (for jq and scripts)
  show    TICKET_ID
          one ticket's delivery: state, attempts, error, helpdesk id and URL, due time
  retry   TICKET_ID
          send a failed ticket again: back to pending, due now, attempts reset
  retry   -state failed [-since DURATION] [-yes]
          retry every failed ticket (with -since, only those created within
          DURATION, e.g. 2h); shows the store, the tickets and their count,
          and asks to confirm ("y") unless -yes is given
  resolve -external-id ID [-external-url URL] TICKET_ID
          an unknown ticket IS in the helpdesk (a person found it there under
          external_id = TICKET_ID): record it delivered with the helpdesk's id
  resolve -resend TICKET_ID
          an unknown ticket is NOT in the helpdesk (a person checked): send it
          again, back to pending, due now, attempts reset
  resolve -failed REASON TICKET_ID
          an unknown ticket is NOT in the helpdesk and is not to be sent:
          record it failed with the reason (its follow-ups fail too)
Every command takes a follow-up's id as listed (COMMENT#<comment_id>,
CLOSE#<close_id>) as it takes a ticket's; a follow-up is sent only after
its ticket and the follow-ups before it.
  check   one lookup, on the configuration's delivery destination, of a key
          no ticket has: says in one line whether the helpdesk answers
          lookups or refuses them (exit status 1: the token may not list
          tickets, so a ticket a send may have created would end unknown)
A ticket that an earlier send may have created is looked up first after a
retry or a resend, and sent again only if the helpdesk still does not hold
it once that send can no longer arrive. Every change first names the store
it acts on (the SQLite file, or the DynamoDB table and its region).
`

// maxBulk bounds the tickets one bulk retry reads and changes; a larger
// backlog is retried by running the command again.
const maxBulk = 10000

// Deliveries runs the operator's command on the configuration's store
// (SQLite or DynamoDB), of store block storeSettings (cfg.Store checked by
// localstore.CheckSettings): args are what follows "deliveries"; stdin answers
// a bulk change's confirmation. It returns the exit status: 0 done, 1
// refused, not confirmed or failed (one line on stderr saying why), 2 bad
// usage.
func Deliveries(ctx context.Context, cfg config.Local, storeSettings localstore.Settings, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, DeliveriesUsage)
		return 2
	}
	cmd, args := args[0], args[1:]
	fs := flag.NewFlagSet("deliveries "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, DeliveriesUsage) }
	var (
		state       = fs.String("state", string(delivery.StateUnknown), "list: the delivery state")
		limit       = fs.Int("limit", 100, "list: at most this many tickets")
		externalID  = fs.String("external-id", "", "resolve: the helpdesk's id of the ticket")
		externalURL = fs.String("external-url", "", "resolve: the helpdesk's URL of the ticket")
		resend      = fs.Bool("resend", false, "resolve: the helpdesk does not hold it; send it again")
		failed      = fs.String("failed", "", "resolve: the helpdesk does not hold it and it is not to be sent: why")
		asJSON      = fs.Bool("json", false, "list: one JSON object per line")
		since       = fs.Duration("since", 0, "retry -state: only tickets created within this long")
		yes         = fs.Bool("yes", false, "retry -state: change without asking")
	)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return 2
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	bulk := cmd == "retry" && set["state"]
	want := map[string]int{"list": 0, "show": 1, "retry": 1, "resolve": 1, "check": 0}
	if bulk {
		want["retry"] = 0
	}
	n, known := want[cmd]
	if !known || len(pos) != n {
		if known {
			fmt.Fprintf(stderr, "deliveries %s: takes %d ticket id(s), got %d\n", cmd, n, len(pos))
		} else {
			fmt.Fprintf(stderr, "deliveries: unknown command %q\n", cmd)
		}
		fmt.Fprint(stderr, DeliveriesUsage)
		return 2
	}
	allowed := map[string][]string{"list": {"state", "limit", "json"}, "resolve": {"external-id", "external-url", "resend", "failed"}}[cmd]
	if bulk {
		allowed = []string{"state", "since", "yes"}
	}
	for name := range set {
		if !slices.Contains(allowed, name) {
			fmt.Fprintf(stderr, "deliveries %s: -%s does not apply\n", cmd, name)
			return 2
		}
	}
	if ways := btoi(*resend) + btoi(*externalID != "") + btoi(set["failed"]); cmd == "resolve" && ways != 1 {
		fmt.Fprintln(stderr, "deliveries resolve: give one of -external-id (it is in the helpdesk), -resend (it is not: send it) or -failed REASON (it is not: do not send it)")
		return 2
	}
	if cmd == "resolve" && set["failed"] && strings.TrimSpace(*failed) == "" {
		fmt.Fprintln(stderr, "deliveries resolve: -failed needs the reason a person decided it")
		return 2
	}
	if cmd == "resolve" && *resend && *externalURL != "" {
		fmt.Fprintln(stderr, "deliveries resolve: -external-url goes with -external-id")
		return 2
	}
	st := delivery.State(*state)
	if cmd == "list" && (!st.Valid() || *limit < 1) {
		fmt.Fprintf(stderr, "deliveries list: -state %q is not one of pending, delivering, delivered, failed, unknown, or -limit is below 1\n", *state)
		return 2
	}
	if bulk && (st != delivery.StateFailed || *since < 0) {
		fmt.Fprintf(stderr, "deliveries retry: -state %q: only failed tickets are retried (unknown ones are resolved, one by one), and -since must not be negative\n", *state)
		return 2
	}

	if cmd == "check" {
		return check(ctx, cfg, stdout, stderr)
	}

	quiet := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	store, closer, where, err := localstore.OpenNamed(ctx, storeSettings, quiet)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer func() { _ = closer.Close() }()
	admin, ok := store.(delivery.Admin)
	if !ok {
		fmt.Fprintf(stderr, "deliveries: store %s keeps no deliveries\n", storeSettings.Kind())
		return 1
	}
	now := time.Now()
	switch cmd {
	case "list":
		recs, err := admin.List(ctx, st, *limit)
		if err != nil {
			return fail(stderr, err)
		}
		if *asJSON {
			if err := writeJSONLines(stdout, recs); err != nil {
				return fail(stderr, err)
			}
		} else {
			table(stdout, recs)
		}
		fmt.Fprintf(stderr, "%d %s delivery record(s)\n", len(recs), st)
		return 0
	case "show":
		return show(ctx, admin, pos[0], stdout, stderr)
	case "retry":
		if bulk {
			return retryAll(ctx, bulkRun{where: where, admin: admin, tickets: store, since: *since, yes: *yes, now: now,
				stdin: stdin, stdout: stdout, stderr: stderr})
		}
		fmt.Fprintf(stderr, "store: %s\n", where)
		if err := delivery.Retry(ctx, admin, pos[0], now); err != nil {
			return fail(stderr, err)
		}
		fmt.Fprintf(stderr, "%s: failed -> pending, due now; a running local server delivers it within a second (a follow-up once its ticket and the follow-ups before it are delivered), the deployed sweep within a minute\n", named(pos[0]))
	case "resolve":
		fmt.Fprintf(stderr, "store: %s\n", where)
		switch {
		case *resend:
			err = delivery.ResolveResend(ctx, admin, pos[0], now)
		case set["failed"]:
			err = delivery.ResolveFailed(ctx, admin, pos[0], *failed, now)
		default:
			err = delivery.ResolveDelivered(ctx, admin, pos[0], delivery.Receipt{ExternalID: *externalID, ExternalURL: *externalURL}, now)
		}
		if err != nil {
			return fail(stderr, err)
		}
		switch {
		case *resend:
			fmt.Fprintf(stderr, "%s: unknown -> pending, due now; a running local server sends it again within a second, the deployed sweep within a minute\n", named(pos[0]))
		case set["failed"]:
			fmt.Fprintf(stderr, "%s: unknown -> failed\n", named(pos[0]))
		default:
			fmt.Fprintf(stderr, "%s: unknown -> delivered as %s\n", named(pos[0]), *externalID)
		}
	}
	return show(ctx, admin, pos[0], stdout, stderr)
}

// check runs delivery.Check on the configuration's destination and
// writes its line: 0 when the lookups work (or the destination has none),
// 1 when they are refused or fail, or no destination is configured.
func check(ctx context.Context, cfg config.Local, stdout, stderr io.Writer) int {
	if cfg.Delivery == nil {
		fmt.Fprintln(stderr, "deliveries check: the configuration has no delivery block: nothing to check")
		return 1
	}
	dst, err := destination.New(*cfg.Delivery)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	fmt.Fprintf(stderr, "destination: %s %s\n", cfg.Delivery.Kind, urls.RedactedRaw(cfg.Delivery.URL))
	line, ok := delivery.Check(ctx, dst)
	fmt.Fprintln(stdout, line)
	if !ok {
		return 1
	}
	return 0
}

// named is how a line names the record id: its kind, then its id
// ("ticket 5f0c…", "comment COMMENT#9a1e…").
func named(id string) string { return delivery.KindOfID(id) + " " + id }

// table writes records as the list's table: each record's outbox id (a
// ticket's id, or a follow-up's COMMENT#… or CLOSE#… key) and its kind.
func table(w io.Writer, recs []delivery.Record) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tSTATE\tATTEMPTS\tDUE_AT\tEXTERNAL_ID\tERROR")
	for _, r := range recs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", r.TicketID, delivery.KindOfID(r.TicketID), r.State, r.Attempts, stamp(r.DueAt),
			dash(r.ExternalID), dash(shown(r.Error)))
	}
	_ = tw.Flush()
}

// listed is one record as list -json writes it: the fields of show, times
// in RFC 3339 (UTC), absent ones left out. ticket_id is the record's
// outbox id, a follow-up's COMMENT#… or CLOSE#… key included (the name
// scripts written for tickets read); kind says which.
type listed struct {
	TicketID        string `json:"ticket_id"`
	Kind            string `json:"kind"`
	State           string `json:"state"`
	Attempts        int    `json:"attempts"`
	LookupFailures  int    `json:"lookup_failures"`
	MayBeInHelpdesk bool   `json:"may_be_in_helpdesk"`
	Error           string `json:"error,omitempty"`
	ExternalID      string `json:"external_id,omitempty"`
	ExternalURL     string `json:"external_url,omitempty"`
	DueAt           string `json:"due_at,omitempty"`
	LeaseUntil      string `json:"lease_until,omitempty"`
	DeliveredAt     string `json:"delivered_at,omitempty"`
}

// writeJSONLines writes one JSON object per record and line (JSON Lines):
// a script reads it as it comes, jq takes it as is, and an empty list is
// no output at all.
func writeJSONLines(w io.Writer, recs []delivery.Record) error {
	enc := json.NewEncoder(w)
	for _, r := range recs {
		if err := enc.Encode(listed{TicketID: r.TicketID, Kind: delivery.KindOfID(r.TicketID), State: string(r.State), Attempts: r.Attempts,
			LookupFailures: r.LookupFailures, MayBeInHelpdesk: r.SentUnknown, Error: shown(r.Error),
			ExternalID: r.ExternalID, ExternalURL: r.ExternalURL, DueAt: jsonStamp(r.DueAt),
			LeaseUntil: jsonStamp(r.LeaseUntil), DeliveredAt: jsonStamp(r.DeliveredAt)}); err != nil {
			return err
		}
	}
	return nil
}

// bulkRun is one bulk retry: the store it acts on and how it asks.
type bulkRun struct {
	where          string // the store, as localstore.OpenNamed names it
	admin          delivery.Admin
	tickets        core.Store // for each ticket's creation time (-since)
	since          time.Duration
	yes            bool
	now            time.Time
	stdin          io.Reader
	stdout, stderr io.Writer
}

// retryAll retries every failed ticket (created within since, when set):
// it shows the store it is about to change, the tickets and their count,
// and goes on only after -yes or a "y" on stdin. Each ticket is retried
// on its own (delivery.Retry), so one that left the failed state in the
// meantime is refused and reported, and the others go on.
func retryAll(ctx context.Context, b bulkRun) int {
	recs, err := b.admin.List(ctx, delivery.StateFailed, maxBulk)
	if err != nil {
		return fail(b.stderr, err)
	}
	// capped: more failed tickets may exist than one List reads (by ticket
	// id, not by age), so a -since filter sees only part of them.
	capped := len(recs) == maxBulk
	what := "failed ticket(s)"
	if b.since > 0 {
		what = fmt.Sprintf("failed ticket(s) created within %s (since %s)", b.since, stamp(b.now.Add(-b.since)))
		kept := recs[:0]
		for _, r := range recs {
			t, err := b.tickets.Ticket(ctx, r.TicketID)
			if err != nil {
				return fail(b.stderr, fmt.Errorf("ticket %s: %w", r.TicketID, err))
			}
			if !t.CreatedAt.Before(b.now.Add(-b.since)) {
				kept = append(kept, r)
			}
		}
		recs = kept
	}
	fmt.Fprintf(b.stderr, "store: %s\n", b.where)
	if capped && b.since > 0 {
		fmt.Fprintf(b.stderr, "more than %d failed tickets: -since looked only at the first %d by ticket id, and may miss newer ones; retry without -since, or one by one (list -state failed -json)\n", maxBulk, maxBulk)
	}
	if len(recs) == 0 {
		fmt.Fprintf(b.stderr, "0 %s: nothing to retry\n", what)
		return 0
	}
	table(b.stderr, recs)
	fmt.Fprintf(b.stderr, "%d %s to retry: each goes back to pending, due now, attempts reset\n", len(recs), what)
	if capped && b.since == 0 {
		fmt.Fprintf(b.stderr, "(at most %d at a time: run the command again for the rest)\n", maxBulk)
	}
	if !b.yes {
		fmt.Fprintf(b.stderr, "retry these %d ticket(s)? [y/N] ", len(recs))
		if !confirmed(b.stdin) {
			fmt.Fprintln(b.stderr, "not confirmed: nothing changed")
			return 1
		}
	}
	done, refused := 0, 0
	for _, r := range recs {
		if err := delivery.Retry(ctx, b.admin, r.TicketID, b.now); err != nil {
			refused++
			fmt.Fprintf(b.stdout, "%s\tnot retried: %s\n", r.TicketID, shown(err.Error()))
			continue
		}
		done++
		fmt.Fprintf(b.stdout, "%s\tfailed -> pending\n", r.TicketID)
	}
	fmt.Fprintf(b.stderr, "%d ticket(s) retried, %d not; a running local server delivers them within a second, the deployed sweep within a minute\n", done, refused)
	if refused > 0 {
		return 1
	}
	return 0
}

// confirmed reads one line of r: "y" or "yes", in any case, confirms;
// anything else, or no line at all (no terminal, as in CI), does not.
func confirmed(r io.Reader) bool {
	if r == nil {
		return false
	}
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil && line == "" {
		return false
	}
	a := strings.ToLower(strings.TrimSpace(line))
	return a == "y" || a == "yes"
}

func show(ctx context.Context, a delivery.Admin, id string, stdout, stderr io.Writer) int {
	r, err := a.Delivery(ctx, id)
	if err != nil {
		return fail(stderr, err)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 1, ' ', 0)
	for _, kv := range [][2]string{
		{"id", r.TicketID},
		{"kind", delivery.KindOfID(r.TicketID)},
		{"state", string(r.State)},
		{"attempts", fmt.Sprint(r.Attempts)},
		{"lookup_failures", fmt.Sprint(r.LookupFailures)},
		{"may_be_in_helpdesk", fmt.Sprint(r.SentUnknown)},
		{"error", dash(shown(r.Error))},
		{"external_id", dash(r.ExternalID)},
		{"external_url", dash(r.ExternalURL)},
		{"due_at", stamp(r.DueAt)},
		{"lease_until", stamp(r.LeaseUntil)},
		{"delivered_at", stamp(r.DeliveredAt)},
		{"trace_id", dash(tracing.TraceID(r.Traceparent))}, // the trace of the call that created it
	} {
		fmt.Fprintf(tw, "%s:\t%s\n", kv[0], kv[1])
	}
	_ = tw.Flush()
	return 0
}

func fail(stderr io.Writer, err error) int {
	if errors.Is(err, delivery.ErrNoRecord) {
		err = fmt.Errorf("%w (no ticket or follow-up has this id, or it was created with no destination configured; a follow-up's id is its COMMENT#… or CLOSE#… key)", err)
	}
	fmt.Fprintln(stderr, shown(err.Error()))
	return 1
}

// parseInterleaved parses flags wherever they stand among the positional
// arguments (flag stops at the first non-flag).
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func jsonStamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// urlInText is a URL inside an error text, up to the first space, quote
// or bracket.
var urlInText = regexp.MustCompile(`[a-zA-Z][a-zA-Z0-9+.-]*://[^\s"'<>()\[\]{}]+`)

// shown is a stored text as the command prints it: on one line, each URL
// in it redacted by core.RedactRawURL, the one redaction of the
// destinations' URLs. The adapters store errors already redacted; this
// holds for any stored text, a hand edit included.
func shown(s string) string {
	return urlInText.ReplaceAllStringFunc(oneLine(s), func(u string) string {
		trimmed := strings.TrimRight(u, ".,;:")
		return urls.RedactedRaw(trimmed) + u[len(trimmed):]
	})
}

// btoi is 1 for true.
func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
