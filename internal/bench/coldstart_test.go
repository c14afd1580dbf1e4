//go:build linux

package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/bench/results"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
)

// coldEvent is a function URL event the handler answers without any I/O
// or hashing (no nonce: 401), so the first invoke measures only what a
// cold process adds.
const coldEvent = `{"version":"2.0","rawPath":"/callback","headers":{"content-type":"application/json","host":"cold.example"},` +
	`"requestContext":{"http":{"method":"POST","path":"/callback"}},"body":"{}","isBase64Encoded":false}`

// deliveryColdEvent is an empty stream batch: the delivery function
// answers it without any I/O.
const deliveryColdEvent = `{"Records":[]}`

// deliveryColdEnv is the delivery function's environment besides the
// table: a Zendesk destination it never calls.
var deliveryColdEnv = map[string]string{"DELIVERY_KIND": "zendesk", "DELIVERY_URL": "http://127.0.0.1:1",
	"DELIVERY_SECRET": `{"email":"cold@example.test","token":"cold-start-token"}`}

type build struct {
	name, tags string
	delivery   bool // ./functions/delivery; else ./functions/callback
	noExporter bool // built with notrace: no OpenTelemetry SDK nor exporter linked
	sqlite     bool
	tracing    bool   // spans exported over OTLP/HTTP to a loopback receiver
	same       *build // the build whose bootstraps this one runs, when it only differs in its environment
	host       string // the host-arch bootstrap
	hostSize   int64
	armSize    int64 // the arm64 deploy build
}

// TestColdStart builds the bootstrap with and without SQLite, for the host
// (measured) and for linux/arm64 (the deploy build: size only), with the
// Makefile's flags, starts each host build cold under aws-lambda-rie
// BENCH_COLDSTART_RUNS times and records the emulator's INIT REPORT (from
// INIT START, which execs the bootstrap, to its first call for the next
// event) and the first invoke's duration; three more times with
// GODEBUG=inittrace=1 for the package initialisation. The function's
// environment is built from scratch (none of the machine's AWS variables).
// The Lambda build runs twice: without OTEL_EXPORTER_OTLP_ENDPOINT (as
// deployed without the collector layer: the no-op provider), and with it
// pointing at an OTLP/HTTP receiver on loopback (tracing on: the SDK's
// provider and exporter set up at init, the first invoke's door span
// exported before it returns); every traced cold start must have
// exported a span, or the figure would not be what it names. It runs a
// third time built with -tags notrace, without the OpenTelemetry SDK and
// exporter, for what linking them costs. The delivery function is
// measured the same three ways (an empty stream batch as its first
// event). BENCH_COLDSTART_ONLY keeps the builds whose name contains it.
func TestColdStart(t *testing.T) {
	out := outFile(t, results.ColdStartEnv)
	runs := envInt(t, results.ColdStartRunsEnv, 7)
	testenv.RIE(t) // fail early (or skip) when the emulator is missing
	dir := t.TempDir()
	lambdaBuild := &build{name: "Lambda build (no SQLite)", tags: "lambda.norpc,nosqlite"}
	builds := []*build{
		lambdaBuild,
		{name: "with SQLite", tags: "lambda.norpc", sqlite: true},
		{name: "Lambda build, tracing on (OTLP to loopback)", tags: lambdaBuild.tags, tracing: true, same: lambdaBuild},
		{name: "Lambda build without the exporter", tags: lambdaBuild.tags + ",notrace", noExporter: true},
	}
	deliveryBuild := &build{name: "delivery: Lambda build", tags: lambdaBuild.tags, delivery: true}
	builds = append(builds, deliveryBuild,
		&build{name: "delivery: tracing on (OTLP to loopback)", tags: deliveryBuild.tags, delivery: true, tracing: true, same: deliveryBuild},
		&build{name: "delivery: without the exporter", tags: deliveryBuild.tags + ",notrace", delivery: true, noExporter: true})
	if only := os.Getenv(results.ColdStartOnlyEnv); only != "" {
		var keep []*build
		for _, b := range builds {
			if strings.Contains(b.name, only) || (b.same != nil && strings.Contains(b.same.name, only)) {
				keep = append(keep, b)
			}
		}
		builds = keep
	}
	// The loopback collector counts the trace exports it is sent (the
	// OTLP/HTTP exporter posts only when it has spans). It decodes
	// nothing: this package is also built at a base revision's tree.
	var exports atomic.Int64
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if body, err := io.ReadAll(r.Body); err == nil && r.Method == http.MethodPost && r.URL.Path == "/v1/traces" && len(body) > 0 {
			exports.Add(1)
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()
	for i, b := range builds {
		if b.same != nil {
			b.host, b.hostSize, b.armSize = b.same.host, b.same.hostSize, b.same.armSize
			continue
		}
		pkg := "./functions/callback"
		if b.delivery {
			pkg = "./functions/delivery"
		}
		b.host = filepath.Join(dir, fmt.Sprintf("bootstrap-%d", i))
		b.hostSize = testenv.BuildFunction(t, pkg, b.tags, runtime.GOARCH, b.host)
		b.armSize = testenv.BuildFunction(t, pkg, b.tags, "arm64", filepath.Join(dir, fmt.Sprintf("bootstrap-%d-arm64", i)))
	}
	const traced = 3
	res := results.ColdStart{HostArch: runtime.GOARCH, Runs: runs, Traced: traced}
	for _, b := range builds {
		var inits, firsts []float64
		endpoint := ""
		if b.tracing {
			endpoint = collector.URL
		}
		for range runs {
			before := exports.Load()
			init, first, _ := coldStart(t, b, false, endpoint)
			if b.tracing && exports.Load() == before {
				t.Fatalf("%s: the cold start exported no span", b.name)
			}
			inits, firsts = append(inits, init), append(firsts, first)
		}
		// Package initialisation, from three more cold starts traced with
		// GODEBUG=inittrace=1 (tracing slows them, so they are not in the
		// INIT REPORT figures): the median total, and per package the mean.
		var totals []float64
		perPkg := map[string]pkgInit{}
		for range traced {
			_, _, trace := coldStart(t, b, true, endpoint)
			total, pkgs := summarizeInitTrace(trace)
			totals = append(totals, total)
			for _, p := range pkgs {
				q := perPkg[p.pkg]
				q.pkg, q.ms, q.bytes = p.pkg, q.ms+p.ms/traced, p.bytes
				perPkg[p.pkg] = q
			}
		}
		var top []results.PackageInit
		for _, p := range perPkg {
			top = append(top, results.PackageInit{Package: p.pkg, Ms: p.ms, Bytes: p.bytes})
		}
		sort.Slice(top, func(i, j int) bool { return top[i].Ms > top[j].Ms })
		top = top[:min(5, len(top))]
		t.Logf("%s: host %d bytes, arm64 %d bytes, INIT REPORT %v ms, first invoke %v ms, package init %v ms",
			b.name, b.hostSize, b.armSize, inits, firsts, totals)
		function := "callback"
		if b.delivery {
			function = "delivery"
		}
		res.Builds = append(res.Builds, results.ColdStartBuild{Name: b.name, Function: function, Tags: b.tags, SQLite: b.sqlite,
			Tracing: b.tracing, NoExporter: b.noExporter,
			HostBytes: b.hostSize, ARM64Bytes: b.armSize, InitMs: inits, FirstMs: firsts, PackageInitMs: totals,
			TopPackages: top})
	}
	if err := results.WriteJSON(out, res); err != nil {
		t.Fatal(err)
	}
}

var (
	initReport = regexp.MustCompile(`INIT REPORT\(durationMs: ([0-9.]+)\)`)
	firstRun   = regexp.MustCompile(`REPORT RequestId: \S+\s+Init Duration: [0-9.]+ ms\s+Duration: ([0-9.]+) ms`)
)

// coldStart starts a fresh emulator with bootstrap, invokes it once and
// returns the INIT REPORT and the first invoke's duration in ms, and, with
// trace, the bootstrap's inittrace lines. A non-empty otlp is the
// function's OTEL_EXPORTER_OTLP_ENDPOINT.
func coldStart(t *testing.T, b *build, trace bool, otlp string) (initMs, firstMs float64, initTrace string) {
	t.Helper()
	vars := map[string]string{
		"TABLE_NAME": "cold-start", "HOOK_KEY": "cold-start-hook-key",
		"AWS_ENDPOINT_URL_DYNAMODB": "http://127.0.0.1:1",
	}
	event := coldEvent
	if b.delivery {
		delete(vars, "HOOK_KEY")
		maps.Copy(vars, deliveryColdEnv)
		event = deliveryColdEvent
	}
	if otlp != "" {
		vars["OTEL_EXPORTER_OTLP_ENDPOINT"] = otlp
	}
	if trace {
		vars["GODEBUG"] = "inittrace=1"
	}
	invokeURL, output, stop := testenv.StartRIE(t, b.host, vars)
	defer stop()
	// Everything the emulator printed so far is its own start-up.
	before := len(output.String())
	raw, err := testenv.InvokeErr(invokeURL, []byte(event))
	if b.delivery {
		// An empty batch: no item failed.
		if err != nil || strings.TrimSpace(string(raw)) != `{"batchItemFailures":[]}` {
			t.Fatalf("invoke: %s %v; want {\"batchItemFailures\":[]}\n%s", raw, err, output)
		}
	} else {
		var answer struct {
			StatusCode int    `json:"statusCode"`
			Body       string `json:"body"`
		}
		if err != nil || json.Unmarshal(raw, &answer) != nil ||
			answer.StatusCode != http.StatusUnauthorized || answer.Body != `{"error":"unauthenticated"}`+"\n" {
			t.Fatalf("invoke: %s %v; want the function URL answer 401 {\"error\":\"unauthenticated\"}\n%s", raw, err, output)
		}
	}
	s := output.Await(firstRun.MatchString, 10*time.Second)
	m, f := initReport.FindStringSubmatch(s), firstRun.FindStringSubmatch(s)
	if m == nil || f == nil {
		t.Fatalf("no INIT REPORT or first REPORT in the emulator's output:\n%s", s)
	}
	initMs, _ = strconv.ParseFloat(m[1], 64)
	firstMs, _ = strconv.ParseFloat(f[1], 64)
	return initMs, firstMs, s[before:]
}

type pkgInit struct {
	pkg   string
	ms    float64
	bytes int64
}

var initLine = regexp.MustCompile(`(?m)^init (\S+) @[0-9.]+ ms, ([0-9.]+) ms clock, ([0-9]+) bytes`)

// summarizeInitTrace returns the bootstrap's package initialisation: the
// total and each package's.
func summarizeInitTrace(trace string) (total float64, pkgs []pkgInit) {
	for _, m := range initLine.FindAllStringSubmatch(trace, -1) {
		ms, _ := strconv.ParseFloat(m[2], 64)
		n, _ := strconv.ParseInt(m[3], 10, 64)
		total += ms
		pkgs = append(pkgs, pkgInit{m[1], ms, n})
	}
	return total, pkgs
}
