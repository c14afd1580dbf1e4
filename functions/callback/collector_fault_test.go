//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/aivax-examples/idempotent-callback/internal/nonce"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/callbacktest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/otlptest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
	"github.com/aivax-examples/idempotent-callback/internal/tracing/otelsetup"
)

// faultFlushTimeout is the flush budget the collector fault tests set
// (TRACE_FLUSH_TIMEOUT).
const faultFlushTimeout = 300 * time.Millisecond

// TestCollectorFaultsUnderRIE runs the callback bootstrap under the
// emulator against DynamoDB Local with spans exported to a collector that
// hangs, refuses connections, answers 503, answers after 3 s (longer than
// the flush budget), and, for comparison, answers at once. For each, two
// operations are called twice (new, repeat):
//   - every answer is the one without tracing: 200, created then
//     deduplicated with the same ticket;
//   - each invocation ends under the flush budget plus a generous margin
//     for the call itself (a warm callback takes milliseconds), far under
//     the callback's 10 s timeout which an unbounded flush reaches;
//   - the exporter made at most one request per invocation (no retry);
//   - with a fault, each invocation writes one "spans dropped" line with
//     at least its door span counted, and the running total adds up; with
//     none, no line is written and the collector has every door span.
func TestCollectorFaultsUnderRIE(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the bootstrap and starts DynamoDB Local and the RIE")
	}
	endpoint := testenv.DynamoDB(t)
	bootstrap := filepath.Join(t.TempDir(), "bootstrap")
	testenv.BuildBootstrap(t, "lambda.norpc,nosqlite", runtime.GOARCH, bootstrap)
	for _, tc := range []struct {
		fault   otlptest.Fault
		delay   time.Duration
		dropped bool
	}{
		{fault: otlptest.Hang, dropped: true},
		{fault: otlptest.Refuse, dropped: true},
		{fault: otlptest.Unavailable, dropped: true},
		{fault: otlptest.Slow, delay: 3 * time.Second, dropped: true},
		{fault: otlptest.Slow, delay: 0},
	} {
		name := tc.fault.String()
		if tc.fault == otlptest.Slow {
			name += "-" + tc.delay.String()
		}
		t.Run(name, func(t *testing.T) {
			col := otlptest.StartFaulty(t, tc.fault, tc.delay)
			const hookKey = "hook-key-fault-test"
			invokeURL, out, _ := testenv.StartRIE(t, bootstrap, map[string]string{
				"TABLE_NAME":                  tableWithUserA(t, endpoint),
				"HOOK_KEY":                    hookKey,
				"NONCE_MIN_COST":              "4",
				"AWS_ENDPOINT_URL_DYNAMODB":   endpoint,
				"OTEL_EXPORTER_OTLP_ENDPOINT": col.URL,
				otelsetup.FlushTimeoutEnv:     faultFlushTimeout.String(),
				// What an unbounded flush would wait for; the budget wins.
				"OTEL_EXPORTER_OTLP_TIMEOUT": "30000",
			})
			invocations := 0
			for op := range 2 {
				body := callbacktest.Create("user-a", fmt.Sprintf("fault-%s-%d", name, op), callbacktest.Title("collector fault"))
				var ticket string
				for i, want := range []string{"created", "deduplicated"} {
					raw := faultEvent(t, hookKey, body)
					start := time.Now()
					resp, err := invokeErr(invokeURL, raw)
					took := time.Since(start)
					invocations++
					if err != nil {
						t.Fatalf("op %d call %d: %v (after %s)\n%s", op, i, err, took, out)
					}
					var got struct {
						Status       string `json:"status"`
						TicketID     string `json:"ticket_id"`
						Deduplicated bool   `json:"deduplicated"`
					}
					if resp.StatusCode != 200 || json.Unmarshal([]byte(resp.Body), &got) != nil {
						t.Fatalf("op %d call %d: %d %s", op, i, resp.StatusCode, resp.Body)
					}
					if status := map[bool]string{false: "created", true: "deduplicated"}[got.Deduplicated]; got.Status != "created" || status != want || got.TicketID == "" {
						t.Errorf("op %d call %d: %s, want status created, %s", op, i, resp.Body, want)
					}
					if i == 0 {
						ticket = got.TicketID
					} else if got.TicketID != ticket {
						t.Errorf("op %d: the repeat answered ticket %s, want %s", op, got.TicketID, ticket)
					}
					// The first invocation includes the cold start.
					limit := faultFlushTimeout + 3*time.Second
					if invocations == 1 {
						limit += 3 * time.Second
					}
					if took > limit {
						t.Errorf("op %d call %d took %s, want under %s (flush budget %s)", op, i, took, limit, faultFlushTimeout)
					}
				}
			}
			if n := col.Requests(); n > int64(invocations) {
				t.Errorf("the collector got %d export requests for %d invocations: the exporter retried", n, invocations)
			}
			// The emulator copies the function's output on its own time:
			// wait for each invocation's lines.
			text := out.Await(func(s string) bool {
				return callbackLogLines(s) >= invocations && (!tc.dropped || len(droppedLines(s)) >= invocations)
			}, 10*time.Second)
			lines := droppedLines(text)
			if !tc.dropped {
				if len(lines) != 0 {
					t.Errorf("%d spans dropped lines with a healthy collector: %+v", len(lines), lines)
				}
				spans, _ := col.Snapshot()
				doors := 0
				for _, s := range spans {
					if s.GetName() == "aivax /callback" {
						doors++
					}
				}
				if doors != invocations {
					t.Errorf("the collector got %d door spans, want %d", doors, invocations)
				}
				return
			}
			if len(lines) != invocations {
				t.Fatalf("%d spans dropped lines, want one per invocation (%d):\n%s", len(lines), invocations, out)
			}
			var sum int64
			for _, l := range lines {
				if l.Dropped < 1 || l.RequestID == "" || l.Reason == "" {
					t.Errorf("spans dropped line %+v: want at least the door span, the request id and a reason", l)
				}
				sum += l.Dropped
				if l.Total != sum {
					t.Errorf("dropped_spans_total %d, want the running sum %d", l.Total, sum)
				}
			}
			t.Logf("%s: %d spans dropped over %d invocations, reasons %q", name, sum, invocations, lines[0].Reason)
		})
	}
}

// faultEvent is a function URL event POSTing body to /callback with a
// fresh nonce.
func faultEvent(t *testing.T, hookKey, body string) []byte {
	t.Helper()
	n, err := nonce.Generate(hookKey, 4)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(events.LambdaFunctionURLRequest{RawPath: "/callback", Body: body,
		Headers:        map[string]string{"content-type": "application/json", "x-request-nonce": n},
		RequestContext: events.LambdaFunctionURLRequestContext{HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: "POST"}}})
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// droppedLine is a "spans dropped" log line.
type droppedLine struct {
	RequestID string `json:"requestId"`
	Dropped   int64  `json:"dropped_spans"`
	Total     int64  `json:"dropped_spans_total"`
	Reason    string `json:"reason"`
}

func droppedLines(out string) []droppedLine {
	var lines []droppedLine
	for _, line := range strings.Split(out, "\n") {
		var l struct {
			Message string `json:"message"`
			droppedLine
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Message == "spans dropped" {
			lines = append(lines, l.droppedLine)
		}
	}
	return lines
}
