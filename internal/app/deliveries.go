package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/config"
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
)

// DeliveriesUsage is the operator's command's synopsis.
const DeliveriesUsage = `usage: callback -config config.json deliveries COMMAND
  list    [-state unknown|failed|pending|delivering|delivered] [-limit 100]
          tickets in a delivery state (default unknown), by ticket id
  show    TICKET_ID
          one ticket's delivery: state, attempts, error, helpdesk id and URL, due time
  retry   TICKET_ID
          send a failed ticket again: back to pending, due now, attempts reset
  resolve -external-id ID [-external-url URL] TICKET_ID
          an unknown ticket IS in the helpdesk (a person found it there under
          external_id = TICKET_ID): record it delivered with the helpdesk's id
  resolve -resend TICKET_ID
          an unknown ticket is NOT in the helpdesk (a person checked): send it
          again, back to pending, due now, attempts reset
`

// Deliveries runs the operator's command on the configuration's store
// (SQLite or DynamoDB): args are what follows "deliveries". It returns the
// exit status: 0 done, 1 refused or failed (one line on stderr saying
// why), 2 bad usage.
func Deliveries(ctx context.Context, cfg config.Local, args []string, stdout, stderr io.Writer) int {
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
	)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return 2
	}
	want := map[string]int{"list": 0, "show": 1, "retry": 1, "resolve": 1}
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
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	allowed := map[string][]string{"list": {"state", "limit"}, "resolve": {"external-id", "external-url", "resend"}}[cmd]
	for name := range set {
		if !slices.Contains(allowed, name) {
			fmt.Fprintf(stderr, "deliveries %s: -%s does not apply\n", cmd, name)
			return 2
		}
	}
	if cmd == "resolve" && *resend == (*externalID != "") {
		fmt.Fprintln(stderr, "deliveries resolve: give either -external-id (it is in the helpdesk) or -resend (it is not), not both")
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

	quiet := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	store, closer, err := OpenStore(ctx, cfg.Store, quiet)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer func() { _ = closer.Close() }()
	admin, ok := store.(delivery.Admin)
	if !ok {
		fmt.Fprintf(stderr, "deliveries: store %s keeps no deliveries\n", cfg.Store.Kind)
		return 1
	}
	now := time.Now()
	switch cmd {
	case "list":
		recs, err := admin.List(ctx, st, *limit)
		if err != nil {
			return fail(stderr, err)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TICKET_ID\tSTATE\tATTEMPTS\tDUE_AT\tEXTERNAL_ID\tERROR")
		for _, r := range recs {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", r.TicketID, r.State, r.Attempts, stamp(r.DueAt),
				dash(r.ExternalID), dash(oneLine(r.Error)))
		}
		_ = tw.Flush()
		fmt.Fprintf(stderr, "%d %s ticket(s)\n", len(recs), st)
		return 0
	case "show":
		return show(ctx, admin, pos[0], stdout, stderr)
	case "retry":
		if err := delivery.Retry(ctx, admin, pos[0], now); err != nil {
			return fail(stderr, err)
		}
		fmt.Fprintf(stderr, "ticket %s: failed -> pending, due now; a running local server delivers it within a second, the deployed sweep within a minute\n", pos[0])
	case "resolve":
		if *resend {
			err = delivery.ResolveResend(ctx, admin, pos[0], now)
		} else {
			err = delivery.ResolveDelivered(ctx, admin, pos[0], delivery.Receipt{ExternalID: *externalID, ExternalURL: *externalURL}, now)
		}
		if err != nil {
			return fail(stderr, err)
		}
		if *resend {
			fmt.Fprintf(stderr, "ticket %s: unknown -> pending, due now; a running local server sends it again within a second, the deployed sweep within a minute\n", pos[0])
		} else {
			fmt.Fprintf(stderr, "ticket %s: unknown -> delivered as %s\n", pos[0], *externalID)
		}
	}
	return show(ctx, admin, pos[0], stdout, stderr)
}

func show(ctx context.Context, a delivery.Admin, id string, stdout, stderr io.Writer) int {
	r, err := a.Delivery(ctx, id)
	if err != nil {
		return fail(stderr, err)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 1, ' ', 0)
	for _, kv := range [][2]string{
		{"ticket_id", r.TicketID},
		{"state", string(r.State)},
		{"attempts", fmt.Sprint(r.Attempts)},
		{"lookup_failures", fmt.Sprint(r.LookupFailures)},
		{"may_be_in_helpdesk", fmt.Sprint(r.SentUnknown)},
		{"error", dash(oneLine(r.Error))},
		{"external_id", dash(r.ExternalID)},
		{"external_url", dash(r.ExternalURL)},
		{"due_at", stamp(r.DueAt)},
		{"lease_until", stamp(r.LeaseUntil)},
		{"delivered_at", stamp(r.DeliveredAt)},
	} {
		fmt.Fprintf(tw, "%s:\t%s\n", kv[0], kv[1])
	}
	_ = tw.Flush()
	return 0
}

func fail(stderr io.Writer, err error) int {
	if errors.Is(err, delivery.ErrNotFound) {
		err = fmt.Errorf("%w (the ticket does not exist, or was created with no destination configured)", err)
	}
	fmt.Fprintln(stderr, oneLine(err.Error()))
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
