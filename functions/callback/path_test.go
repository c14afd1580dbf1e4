package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/aivax-examples/idempotent-callback/internal/config"
	"github.com/aivax-examples/idempotent-callback/internal/lambdart"
	"github.com/aivax-examples/idempotent-callback/internal/lambdaurl"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
	"github.com/aivax-examples/idempotent-callback/internal/tracing/otelsetup"
)

// pathBudget is the most in-module files and packages one create_ticket
// may run on the callback Lambda, the cold start aside: each layer a
// request crosses is a place its reader must open. Beside the door, the
// service, idem and the store, a new call runs the function's own
// handler.go (it waits for the claim's DynamoDB requests before
// answering: Lambda freezes the process once it has), the bounded span
// export on the handler's goroutine (otelsetup/export.go), and both
// runtime packages: the function URL's adapter (lambdaurl) and the
// invocation's logger, which both Lambdas share (lambdart).
var pathBudget = struct{ files, packages int }{files: 26, packages: 13}

// TestCreateTicketPath counts the in-module source files and packages
// whose statements run during one create_ticket invocation of the
// callback function, built as main builds it, on DynamoDB Local, and
// during its repeat. It runs only in a test binary built with coverage
// (make path: -covermode=count -coverpkg for the module); a plain go test
// skips it. The test runs itself three times, each a fresh process on a
// fresh table: the cold start alone, the cold start and the new call, and
// those and the repeat; a file ran in a step when one of its blocks counts
// more than in the run before. It fails when either call runs more than
// pathBudget.
func TestCreateTicketPath(t *testing.T) {
	if steps := os.Getenv(envPathSteps); steps != "" {
		n, err := strconv.Atoi(steps)
		if err != nil {
			t.Fatal(err)
		}
		runPathSteps(t, n)
		return
	}
	if m := testing.CoverMode(); m != "count" && m != "atomic" {
		// Under -covermode=set a block run at the cold start would not
		// count again, so the path would be undercounted.
		t.Skipf("counts executed files: run with -covermode=count -coverpkg=<module>/... (make path), not %q", m)
	}
	// One DynamoDB Local for the three runs, started here so that a
	// missing one is reported as such.
	endpoint := testenv.DynamoDB(t)
	dir := t.TempDir()
	var profiles []map[string]int
	for n := 0; n <= 2; n++ {
		out := filepath.Join(dir, strconv.Itoa(n)+".out")
		cmd := exec.Command(os.Args[0], "-test.run=^TestCreateTicketPath$", "-test.coverprofile="+out)
		cmd.Env = append(os.Environ(), envPathSteps+"="+strconv.Itoa(n), testenv.EnvDynamoDBEndpoint+"="+endpoint)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("run with %d calls: %v\n%s", n, err, b)
		}
		profiles = append(profiles, readProfile(t, out))
	}
	for i, name := range []string{"new call", "repeat"} {
		files, pkgs := ranBetween(profiles[i], profiles[i+1])
		t.Logf("%s runs %d files in %d packages:\n  %s", name, len(files), len(pkgs), strings.Join(files, "\n  "))
		if len(files) == 0 {
			t.Fatalf("%s ran no file: the profiles do not count", name)
		}
		if len(files) > pathBudget.files || len(pkgs) > pathBudget.packages {
			t.Errorf("%s runs %d files in %d packages; the budget is %d files in %d packages",
				name, len(files), len(pkgs), pathBudget.files, pathBudget.packages)
		}
	}
}

// envPathSteps tells a run of TestCreateTicketPath started by itself how
// many calls to make after the cold start.
const envPathSteps = "PATH_TEST_CALLS"

// runPathSteps starts the callback function as main does, on a fresh
// table with user-a, and sends the first calls of create.json (new) and
// repeat.json (its repeat).
func runPathSteps(t *testing.T, calls int) {
	endpoint := testenv.DynamoDB(t)
	table := tableWithUserA(t, endpoint)
	testenv.IsolatedAWSEnv(t, map[string]string{"AWS_ENDPOINT_URL_DYNAMODB": endpoint})
	env := map[string]string{"TABLE_NAME": table, "HOOK_KEY": rieHookKey}
	cfg, err := config.FromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	logger := slog.New(lambdart.LogHandler(slog.NewJSONHandler(&logs, nil)))
	tp, err := otelsetup.Setup(context.Background(), otelsetup.Options{Getenv: func(string) string { return "" }, Service: "callback", Lambda: true})
	if err != nil {
		t.Fatal(err)
	}
	h, err := Handler(context.Background(), cfg, logger, tp)
	if err != nil {
		t.Fatal(err)
	}
	invoke := otelsetup.LambdaHandler(tp, lambdaurl.Wrap(h))
	root := testenv.RepoRoot(t)
	for _, step := range []struct{ event, want string }{
		{"create.json", `"status":"created"`},
		{"repeat.json", `"deduplicated":true`},
	}[:calls] {
		raw, err := os.ReadFile(filepath.Join(root, "events", step.event))
		if err != nil {
			t.Fatal(err)
		}
		var ev events.LambdaFunctionURLRequest
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatalf("%s: %v", step.event, err)
		}
		resp, err := invoke(context.Background(), ev)
		if err != nil || resp.StatusCode != 200 || !strings.Contains(resp.Body, step.want) {
			t.Fatalf("%s: %d %s %v; want 200 with %s; log:\n%s", step.event, resp.StatusCode, resp.Body, err, step.want, logs.String())
		}
	}
}

// readProfile reads a coverage profile: each block (file:start,end) →
// how many times it ran.
func readProfile(t *testing.T, name string) map[string]int {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	blocks := map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// name.go:line.col,line.col statements count
		fields := strings.Fields(sc.Text())
		if len(fields) != 3 || !strings.Contains(fields[0], ".go:") {
			continue
		}
		n, err := strconv.Atoi(fields[2])
		if err != nil {
			t.Fatalf("%s: %q: %v", name, sc.Text(), err)
		}
		blocks[fields[0]] += n
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(blocks) == 0 {
		t.Fatalf("%s holds no blocks", name)
	}
	return blocks
}

// ranBetween lists the in-module product files (tests and test support
// aside) with a block that ran more often in after than in before, and
// their packages.
func ranBetween(before, after map[string]int) (files, pkgs []string) {
	ran, pkgSet := map[string]bool{}, map[string]bool{}
	for block, n := range after {
		if n <= before[block] {
			continue
		}
		file := block[:strings.Index(block, ".go:")+3]
		if strings.Contains(file, "/internal/testkit/") || strings.HasSuffix(file, "_test.go") {
			continue
		}
		ran[file], pkgSet[path.Dir(file)] = true, true
	}
	for f := range ran {
		files = append(files, f)
	}
	for p := range pkgSet {
		pkgs = append(pkgs, p)
	}
	sort.Strings(files)
	return files, pkgs
}
