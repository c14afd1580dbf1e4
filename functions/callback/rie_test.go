//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/store/dynamo"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// expectation is one entry of events/expected.json.
type expectation struct {
	StatusCode   int      `json:"statusCode"`
	Status       string   `json:"status"`       // the body's "status"; empty: the body has none
	Deduplicated *bool    `json:"deduplicated"` // when set, the body's "deduplicated"
	ErrorCode    string   `json:"error_code"`   // rejections: the body's error.code
	SameTicketAs string   `json:"same_ticket_as"`
	Functions    []string `json:"functions"` // GET /functions: the catalogue's names, in order
}

// rieHookKey is the hook key the events' nonces were made from (the
// hook_key of config.example.json).
const rieHookKey = "local-demo-hook-key"

// TestBootstrapUnderRIE runs the real bootstrap binary under the Lambda
// Runtime Interface Emulator against DynamoDB Local and replays every
// function URL event of events/ in order, checking each answer against
// events/expected.json (the answers of docs/contract.md, Responses, on a
// fresh table).
func TestBootstrapUnderRIE(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the bootstrap and starts DynamoDB Local and the RIE")
	}
	root := testenv.RepoRoot(t)
	names, events, expected := loadEvents(t, filepath.Join(root, "events"))
	t.Logf("events in order: %s", strings.Join(names, " "))

	// The store, seeded with the users of config.example.json that the
	// events name.
	endpoint := testenv.DynamoDB(t)
	table := testenv.CreateTable(t, endpoint)
	client := testenv.DynamoClient(t, endpoint)
	store := dynamo.New(client, table, dynamo.Options{CallTimeout: 10 * time.Second})
	ctx := context.Background()
	for _, u := range []core.User{
		{ExternalID: "user-a", TenantID: "tenant-a", UserID: "alice"},
		{ExternalID: "user-d", TenantID: "tenant-a", UserID: "dave", Disabled: true},
	} {
		if err := store.PutUser(ctx, u); err != nil {
			t.Fatalf("seed %s: %v", u.ExternalID, err)
		}
	}

	bootstrap := filepath.Join(t.TempDir(), "bootstrap")
	size := testenv.BuildBootstrap(t, "lambda.norpc,nosqlite", runtime.GOARCH, bootstrap)
	t.Logf("bootstrap (host arch, the Lambda build's flags): %d bytes (%.1f MiB)", size, float64(size)/(1<<20))
	invokeURL, output, _ := testenv.StartRIE(t, bootstrap, map[string]string{
		"TABLE_NAME":                table,
		"HOOK_KEY":                  rieHookKey,
		"AWS_ENDPOINT_URL_DYNAMODB": endpoint,
	})

	tickets := map[string]string{} // event file -> ticket_id it returned
	for _, name := range names {
		exp := expected[name]
		resp := invoke(t, invokeURL, events[name])
		if resp.StatusCode != exp.StatusCode {
			t.Errorf("%s: statusCode %d, want %d; body %s", name, resp.StatusCode, exp.StatusCode, resp.Body)
			continue
		}
		body := resp.Body
		if resp.IsBase64Encoded {
			raw, err := base64.StdEncoding.DecodeString(body)
			if err != nil {
				t.Errorf("%s: response body is not base64: %v", name, err)
				continue
			}
			body = string(raw)
		}
		if ct := resp.Headers["content-type"]; !strings.HasPrefix(ct, "application/json") {
			t.Errorf("%s: content-type %q, want application/json", name, ct)
		}
		var got struct {
			Status       *string         `json:"status"`
			TicketID     string          `json:"ticket_id"`
			Deduplicated *bool           `json:"deduplicated"`
			RawError     json.RawMessage `json:"error"`
			Functions    []struct {
				Name          string          `json:"name"`
				CallbackURL   string          `json:"callbackUrl"`
				ContentFormat json.RawMessage `json:"contentFormat"`
			} `json:"functions"`
		}
		if err := json.Unmarshal([]byte(body), &got); err != nil {
			t.Errorf("%s: body is not a JSON object: %v: %s", name, err, body)
			continue
		}
		switch {
		case exp.Status == "" && got.Status != nil:
			t.Errorf("%s: body has status %q, want none: %s", name, *got.Status, body)
		case exp.Status != "" && (got.Status == nil || *got.Status != exp.Status):
			t.Errorf("%s: body status %v, want %q: %s", name, deref(got.Status), exp.Status, body)
		}
		if exp.Deduplicated != nil && (got.Deduplicated == nil || *got.Deduplicated != *exp.Deduplicated) {
			t.Errorf("%s: deduplicated %v, want %v: %s", name, deref(got.Deduplicated), *exp.Deduplicated, body)
		}
		if exp.Status == "created" {
			if got.TicketID == "" {
				t.Errorf("%s: no ticket_id: %s", name, body)
			}
			tickets[name] = got.TicketID
		}
		if exp.SameTicketAs != "" {
			if want := tickets[exp.SameTicketAs]; want == "" || got.TicketID != want {
				t.Errorf("%s: ticket_id %q, want %q, the ticket of %s", name, got.TicketID, want, exp.SameTicketAs)
			}
		} else if exp.Deduplicated != nil && !*exp.Deduplicated {
			for other, id := range tickets {
				if other != name && id == got.TicketID {
					t.Errorf("%s: created ticket %s again, already returned for %s", name, id, other)
				}
			}
		}
		if exp.ErrorCode != "" {
			var e struct{ Code, Message string }
			if err := json.Unmarshal(got.RawError, &e); err != nil || e.Code != exp.ErrorCode || e.Message == "" {
				t.Errorf("%s: error %s, want code %q with a message", name, got.RawError, exp.ErrorCode)
			}
		}
		if exp.Functions != nil {
			var fnames []string
			host := events[name].Headers["host"]
			for _, f := range got.Functions {
				fnames = append(fnames, f.Name)
				if want := "https://" + host + "/callback"; f.CallbackURL != want {
					t.Errorf("%s: %s callbackUrl %q, want %q", name, f.Name, f.CallbackURL, want)
				}
				if len(f.ContentFormat) == 0 || f.ContentFormat[0] != '{' {
					t.Errorf("%s: %s has no JSON Schema contentFormat", name, f.Name)
				}
			}
			if strings.Join(fnames, ",") != strings.Join(exp.Functions, ",") {
				t.Errorf("%s: functions %v, want %v", name, fnames, exp.Functions)
			}
		}
	}

	// The repeats wrote nothing: one ticket and one operation per created
	// event, and the users.
	counts := countItems(t, client, table)
	created := len(tickets) - countSameTicket(expected)
	if counts["TICKET#"] != created || counts["OP#"] != created || counts["USER#"] != 2 || len(counts) != 3 {
		t.Errorf("table holds %v, want %d TICKET#, %d OP#, 2 USER#", counts, created, created)
	}

	// The runtime's output: one REPORT per invocation, the first with the
	// cold start's Init Duration; no secret or payload in any line.
	// The RIE prints the REPORT lines before answering, but the copy from
	// its pipe may lag.
	out := output.Await(func(s string) bool { return strings.Count(s, "REPORT RequestId:") >= len(names) }, 10*time.Second)
	if n := strings.Count(out, "REPORT RequestId:"); n != len(names) {
		t.Errorf("%d REPORT lines for %d invocations", n, len(names))
	}
	m := regexp.MustCompile(`REPORT RequestId: \S+\s+Init Duration: ([0-9.]+) ms`).FindStringSubmatch(out)
	if m == nil {
		t.Errorf("no REPORT line with Init Duration in the RIE output:\n%s", out)
	} else {
		t.Logf("RIE REPORT Init Duration: %s ms", m[1])
	}
	if m := regexp.MustCompile(`INIT REPORT\(durationMs: ([0-9.]+)\)`).FindStringSubmatch(out); m != nil {
		t.Logf("runtime init (INIT START to first /next): %s ms", m[1])
	}
	leaks := []string{rieHookKey, "Cannot sign in", "Printer on floor 3"}
	for _, ev := range events {
		if n := ev.Headers["x-request-nonce"]; n != "" {
			leaks = append(leaks, n)
		}
	}
	for _, s := range leaks {
		if strings.Contains(out, s) {
			t.Errorf("the function's output contains %q (the log must never hold the nonce, the hook key or the arguments)", s)
		}
	}
	if lines := callbackLogLines(out); lines != len(names) {
		t.Errorf("%d JSON callback log lines for %d invocations", lines, len(names))
	}
	checkEMFLines(t, out, len(names))
	if t.Failed() {
		t.Logf("RIE and bootstrap output:\n%s", out)
	}
}

// urlEvent is the part of a function URL event the test reads.
type urlEvent struct {
	raw     []byte
	Headers map[string]string `json:"headers"`
}

// loadEvents reads events/*.json (not env.json or expected.json) and
// expected.json, and orders the events: alphabetically, with those that
// must repeat another event's ticket after it.
func loadEvents(t *testing.T, dir string) ([]string, map[string]urlEvent, map[string]expectation) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var expected map[string]expectation
	if err := dec.Decode(&expected); err != nil {
		t.Fatalf("expected.json: %v", err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	events := map[string]urlEvent{}
	var names []string
	for _, f := range files {
		name := filepath.Base(f)
		if name == "env.json" || name == "expected.json" || strings.HasPrefix(name, "delivery-") || strings.HasPrefix(name, "mcp-") {
			continue // delivery-*.json are the delivery function's events; mcp-*.json need an issuer (rie_mcp_test.go)
		}
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		ev := urlEvent{raw: raw}
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, ok := expected[name]; !ok {
			t.Fatalf("events/%s has no entry in events/expected.json", name)
		}
		events[name] = ev
		names = append(names, name)
	}
	for name, exp := range expected {
		if _, ok := events[name]; !ok {
			t.Fatalf("events/expected.json names %s, which is not in events/", name)
		}
		if exp.SameTicketAs != "" {
			if ref, ok := expected[exp.SameTicketAs]; !ok || ref.Status != "created" || ref.SameTicketAs != "" {
				t.Fatalf("expected.json: %s: same_ticket_as %q is not a created event", name, exp.SameTicketAs)
			}
		}
	}
	sort.SliceStable(names, func(i, j int) bool {
		return (expected[names[i]].SameTicketAs == "") && (expected[names[j]].SameTicketAs != "")
	})
	return names, events, expected
}

func countSameTicket(expected map[string]expectation) int {
	n := 0
	for _, e := range expected {
		if e.SameTicketAs != "" {
			n++
		}
	}
	return n
}

// urlResponse is a function URL response as the handler returns it.
type urlResponse struct {
	StatusCode      int               `json:"statusCode"`
	Headers         map[string]string `json:"headers"`
	Body            string            `json:"body"`
	IsBase64Encoded bool              `json:"isBase64Encoded"`
}

func invoke(t *testing.T, url string, ev urlEvent) urlResponse {
	t.Helper()
	r, err := invokeErr(url, ev.raw)
	if err != nil {
		t.Fatalf("invoke: %v", err)
	}
	return r
}

// invokeErr is invoke for a goroutine other than the test's: it returns
// the error instead of failing the test.
func invokeErr(url string, raw []byte) (urlResponse, error) {
	b, err := testenv.InvokeErr(url, raw)
	if err != nil {
		return urlResponse{}, err
	}
	var r urlResponse
	if err := json.Unmarshal(b, &r); err != nil {
		return urlResponse{}, fmt.Errorf("the function returned no function URL response: %v: %s", err, b)
	}
	return r, nil
}

// callbackLogLines counts the handler's JSON log lines (docs/contract.md,
// Logs and metrics).
func callbackLogLines(out string) int {
	n := 0
	for _, line := range strings.Split(out, "\n") {
		var l struct {
			Message    string `json:"message"`
			HTTPStatus *int   `json:"http_status"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Message == "callback" && l.HTTPStatus != nil {
			n++
		}
	}
	return n
}

// countItems counts the table's items by pk prefix (OP#, TICKET#, USER#).
func countItems(t *testing.T, c *dynamodb.Client, table string) map[string]int {
	t.Helper()
	counts := map[string]int{}
	p := dynamodb.NewScanPaginator(c, &dynamodb.ScanInput{TableName: &table})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatalf("scan: %v", err)
		}
		for _, item := range page.Items {
			pk, _ := item[dynamo.PartitionKey].(*types.AttributeValueMemberS)
			if pk == nil {
				t.Errorf("item without a string pk: %v", item)
				continue
			}
			prefix, _, ok := strings.Cut(pk.Value, "#")
			if !ok {
				prefix = pk.Value
			}
			counts[prefix+"#"]++
		}
	}
	return counts
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}
