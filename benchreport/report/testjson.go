package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/perf/benchfmt"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

// testRun is what one or more `go test -json` streams said.
type testRun struct {
	// Results are the benchmark results, in the order they were printed.
	Results []*benchfmt.Result
	// Output is each test's output lines, by test name.
	Output map[string][]string
	// Passed and Failed name the tests (and subtests) by their final action.
	Passed, Failed map[string]bool
}

// readTestJSON reads `go test -json` streams (several runs may be
// concatenated in one file) and extracts the benchmark results with
// benchfmt and each test's output lines.
func readTestJSON(path string) (*testRun, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	return parseTestJSON(f, path)
}

func parseTestJSON(r io.Reader, name string) (*testRun, error) {
	run := &testRun{Output: map[string][]string{}, Passed: map[string]bool{}, Failed: map[string]bool{}}
	// Benchmark lines are printed by the package's main goroutine, so their
	// events carry no Test (or the benchmark's name, on newer Go); the text
	// of all output events, in order, is the benchmark format benchfmt reads.
	var text bytes.Buffer
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var ev event
		if err := json.Unmarshal(b, &ev); err != nil {
			return nil, fmt.Errorf("%s:%d: not a go test -json event: %w", name, line, err)
		}
		switch ev.Action {
		case "output":
			text.WriteString(ev.Output)
			if ev.Test != "" {
				run.Output[ev.Test] = append(run.Output[ev.Test], strings.TrimRight(ev.Output, "\n"))
			}
		case "pass":
			if ev.Test != "" {
				run.Passed[ev.Test] = true
			}
		case "fail":
			if ev.Test != "" {
				run.Failed[ev.Test] = true
			} else {
				return nil, fmt.Errorf("%s: package %s failed", name, ev.Package)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	br := benchfmt.NewReader(&text, name)
	for br.Scan() {
		switch rec := br.Result(); rec := rec.(type) {
		case *benchfmt.Result:
			run.Results = append(run.Results, rec.Clone())
		case *benchfmt.SyntaxError:
			// Test output that merely looks like a benchmark line (a
			// t.Log starting with "Benchmark") is not a result.
			continue
		}
	}
	if err := br.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return run, nil
}

// values returns every value of unit that benchmark name (without its
// -GOMAXPROCS suffix) reported, in order.
func (r *testRun) values(name, unit string) []float64 {
	var vs []float64
	for _, res := range r.Results {
		if baseName(res) != name {
			continue
		}
		if v, ok := res.Value(unit); ok {
			vs = append(vs, v)
		}
	}
	return vs
}

// names are the benchmarks the run reported, in first-seen order.
func (r *testRun) names() []string {
	seen := map[string]bool{}
	var out []string
	for _, res := range r.Results {
		if n := baseName(res); !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

// units are the units benchmark name reported, in order.
func (r *testRun) units(name string) []string {
	seen := map[string]bool{}
	var out []string
	for _, res := range r.Results {
		if baseName(res) != name {
			continue
		}
		for _, v := range res.Values {
			if !seen[v.Unit] {
				seen[v.Unit] = true
				out = append(out, v.Unit)
			}
		}
	}
	return out
}

var procsSuffix = regexp.MustCompile(`-[0-9]+$`)

func baseName(r *benchfmt.Result) string {
	return "Benchmark" + procsSuffix.ReplaceAllString(string(r.Name), "")
}

var countLine = regexp.MustCompile(`^\s*\S+\.go:[0-9]+: (.+): ([0-9]+) DynamoDB requests$`)

// RoundTrip is one step of TestRoundTripsPerCallback.
type RoundTrip struct {
	Step     string
	Requests int
}

// roundTrips returns the steps TestRoundTripsPerCallback logged, and fails
// unless the test passed (its counts are asserted) and logged at least one.
func (r *testRun) roundTrips(test string) ([]RoundTrip, error) {
	if !r.Passed[test] {
		return nil, fmt.Errorf("%s did not pass", test)
	}
	var out []RoundTrip
	for _, l := range r.Output[test] {
		if m := countLine.FindStringSubmatch(l); m != nil {
			n, _ := strconv.Atoi(m[2])
			out = append(out, RoundTrip{Step: m[1], Requests: n})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s logged no \"<step>: <n> DynamoDB requests\" line", test)
	}
	return out, nil
}
