//go:build linux

package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/testenv"
)

// Environment of TestColdStart.
const (
	envColdStartOut  = "BENCH_COLDSTART_OUT"  // the Markdown is written here; unset: skip
	envColdStartRuns = "BENCH_COLDSTART_RUNS" // cold starts per build (default 7)
)

// coldEvent is a function URL event the handler answers without any I/O
// or hashing (no nonce: 401), so the first invoke measures only what a
// cold process adds.
const coldEvent = `{"version":"2.0","rawPath":"/callback","headers":{"content-type":"application/json","host":"cold.example"},` +
	`"requestContext":{"http":{"method":"POST","path":"/callback"}},"body":"{}","isBase64Encoded":false}`

type build struct {
	name, tags string
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
func TestColdStart(t *testing.T) {
	out := os.Getenv(envColdStartOut)
	if out == "" {
		t.Skip(envColdStartOut + " not set: the cold-start table is made by scripts/bench.sh")
	}
	runs := 7
	if v := os.Getenv(envColdStartRuns); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q", envColdStartRuns, v)
		}
		runs = n
	}
	testenv.RIE(t) // fail early (or skip) when the emulator is missing
	dir := t.TempDir()
	builds := []*build{
		{name: "Lambda build (no SQLite)", tags: "lambda.norpc,nosqlite"},
		{name: "with SQLite", tags: "lambda.norpc"},
	}
	for i, b := range builds {
		b.host = filepath.Join(dir, fmt.Sprintf("bootstrap-%d", i))
		b.hostSize = testenv.BuildBootstrap(t, b.tags, runtime.GOARCH, b.host)
		b.armSize = testenv.BuildBootstrap(t, b.tags, "arm64", filepath.Join(dir, fmt.Sprintf("bootstrap-%d-arm64", i)))
	}
	var md strings.Builder
	fmt.Fprintf(&md, "| build | `-tags` | bootstrap linux/%s | bootstrap linux/arm64 (deployed) | INIT REPORT, median of %d (min–max) | first invoke, median | package init, median of 3 (inittrace) |\n",
		runtime.GOARCH, runs)
	md.WriteString("|---|---|---:|---:|---:|---:|---:|\n")
	var traces strings.Builder
	for _, b := range builds {
		var inits, firsts []float64
		for range runs {
			init, first, _ := coldStart(t, b.host, false)
			inits, firsts = append(inits, init), append(firsts, first)
		}
		// Package initialisation, from three more cold starts traced with
		// GODEBUG=inittrace=1 (tracing slows them, so they are not in the
		// INIT REPORT figures): the median total, and per package the mean.
		var totals []float64
		perPkg := map[string]pkgInit{}
		const traced = 3
		for range traced {
			_, _, trace := coldStart(t, b.host, true)
			total, pkgs := summarizeInitTrace(trace)
			totals = append(totals, total)
			for _, p := range pkgs {
				q := perPkg[p.pkg]
				q.pkg, q.ms, q.bytes = p.pkg, q.ms+p.ms/traced, p.bytes
				perPkg[p.pkg] = q
			}
		}
		slices.Sort(totals)
		total := median(totals)
		var top []pkgInit
		for _, p := range perPkg {
			top = append(top, p)
		}
		sort.Slice(top, func(i, j int) bool { return top[i].ms > top[j].ms })
		top = top[:min(5, len(top))]
		slices.Sort(inits)
		slices.Sort(firsts)
		t.Logf("%s: host %d bytes, arm64 %d bytes, INIT REPORT %v ms, first invoke %v ms, package init %.1f ms",
			b.name, b.hostSize, b.armSize, inits, firsts, total)
		fmt.Fprintf(&md, "| %s | `%s` | %s | %s | %.1f ms (%.1f–%.1f) | %.1f ms | %.1f ms |\n", b.name, b.tags,
			mib(b.hostSize), mib(b.armSize), median(inits), inits[0], inits[len(inits)-1], median(firsts), total)
		fmt.Fprintf(&traces, "\nLargest package initialisers, %s (GODEBUG=inittrace=1, mean of %d cold starts):\n\n", b.name, traced)
		for _, p := range top {
			fmt.Fprintf(&traces, "- `%s`: %.2f ms, %s allocated\n", p.pkg, p.ms, kib(p.bytes))
		}
	}
	md.WriteString(traces.String())
	if err := os.WriteFile(out, []byte(md.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

var (
	initReport = regexp.MustCompile(`INIT REPORT\(durationMs: ([0-9.]+)\)`)
	firstRun   = regexp.MustCompile(`REPORT RequestId: \S+\s+Init Duration: [0-9.]+ ms\s+Duration: ([0-9.]+) ms`)
)

// coldStart starts a fresh emulator with bootstrap, invokes it once and
// returns the INIT REPORT and the first invoke's duration in ms, and, with
// trace, the bootstrap's inittrace lines.
func coldStart(t *testing.T, bootstrap string, trace bool) (initMs, firstMs float64, initTrace string) {
	t.Helper()
	vars := map[string]string{
		"TABLE_NAME": "cold-start", "HOOK_KEY": "cold-start-hook-key",
		"AWS_ENDPOINT_URL_DYNAMODB": "http://127.0.0.1:1",
	}
	if trace {
		vars["GODEBUG"] = "inittrace=1"
	}
	invokeURL, output, stop := testenv.StartRIE(t, bootstrap, vars)
	defer stop()
	// Everything the emulator printed so far is its own start-up.
	before := len(output.String())
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Post(
		invokeURL, "application/json", strings.NewReader(coldEvent))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	var answer struct {
		StatusCode int    `json:"statusCode"`
		Body       string `json:"body"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &answer) != nil ||
		answer.StatusCode != http.StatusUnauthorized || answer.Body != `{"error":"unauthenticated"}`+"\n" {
		t.Fatalf("invoke: %d %s; want the function URL answer 401 {\"error\":\"unauthenticated\"}\n%s", resp.StatusCode, body, output)
	}
	var s string
	for deadline := time.Now().Add(10 * time.Second); ; {
		s = output.String()
		if firstRun.MatchString(s) || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
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

func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB (%d bytes)", float64(n)/(1<<20), n) }
func kib(n int64) string { return fmt.Sprintf("%.0f KiB", float64(n)/1024) }
