package idem_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// The packages of idem import nothing of the product: no AWS Lambda, no
// HTTP server, MCP, ticket, helpdesk, OpenTelemetry or AIVAX package, nothing of this
// module's internal tree. The root package, memstore and idemtest import
// the standard library only (and no net/http); dynamostore adds the AWS
// SDK, sqlitestore the SQLite driver.
func TestDependencies(t *testing.T) {
	root := testenv.RepoRoot(t)
	const module = "github.com/aivax-examples/idempotent-callback"
	forbidden := []string{"aws-lambda-go", module + "/internal/", "mcp", "ticket", "helpdesk", "zendesk", "webhook", "httpapi",
		"lambdaurl", "lambdart", "nonce", "opentelemetry", "aivax-examples/idempotent-callback/cmd", "aivax-examples/idempotent-callback/functions", "net/http/httptest"}
	for pkg, stdlibOnly := range map[string]bool{
		"./idem": true, "./idem/memstore": true, "./idem/idemtest": true, "./idem/dynamostore": false, "./idem/sqlitestore": false,
	} {
		cmd := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}|{{.ImportPath}}", pkg)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		var deps []string
		for line := range strings.Lines(strings.TrimSpace(string(out))) {
			nonStd, path, _ := strings.Cut(strings.TrimSpace(line), "|")
			deps = append(deps, path)
			for _, f := range forbidden {
				if strings.Contains(path, f) && !strings.HasPrefix(path, module+"/idem") {
					t.Errorf("%s depends on %s", pkg, path)
				}
			}
			if stdlibOnly && nonStd != "" && !strings.HasPrefix(nonStd, module+"/idem") {
				t.Errorf("%s depends on %s, outside the standard library", pkg, nonStd)
			}
			if stdlibOnly && path == "net/http" {
				t.Errorf("%s depends on net/http", pkg)
			}
		}
		if len(deps) < 5 {
			t.Fatalf("go list -deps %s listed %d packages: %v", pkg, len(deps), deps)
		}
	}
}

// The package is used from outside this module: a throwaway module that
// requires it through a replace directive builds and runs a program on
// idem and its stores, and runs the packages' examples (the DynamoDB one
// on DynamoDB Local). Offline: the module cache this module's build
// already filled, no proxy, no checksum database.
func TestUsableFromAnotherModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds another module")
	}
	root := testenv.RepoRoot(t)
	endpoint := testenv.DynamoDB(t)
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	write("go.sum", string(sum))
	write("go.mod", "module example.com/idemuser\n\ngo 1.27.0\n\n"+
		"require github.com/aivax-examples/idempotent-callback v0.0.0\n\n"+
		"replace github.com/aivax-examples/idempotent-callback => "+root+"\n")
	write("main.go", outsideProgram)
	env := append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOSUMDB=off", "GOWORK=off", "GOTOOLCHAIN=go1.27.3",
		testenv.EnvDynamoDBEndpoint+"="+endpoint)
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s in the other module: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	if got, want := run("run", "."), "created replayed conflict 1\ntrue\n"; got != want {
		t.Errorf("go run: %q, want %q", got, want)
	}
	out := run("test", "-count=1", "-run", "^Example", "-v",
		"github.com/aivax-examples/idempotent-callback/idem/...")
	for _, ex := range []string{"ExampleGuard", "ExampleGuard_Check", "ExampleCache", "ExampleWaitPolicy", "Example_order", "Example_booking", "ExampleKey"} {
		if !strings.Contains(out, "--- PASS: "+ex+" ") {
			t.Errorf("example %s did not pass in the other module:\n%s", ex, out)
		}
	}
}

// outsideProgram is the other module's program: a Guard with a Cache and
// a Wait, checked at start, makes a call idempotent with the in-memory
// store (the repeat and the other owner's call answered from the cache:
// one claim in all), and the store refuses a record without an expiry;
// the DynamoDB and SQLite stores are built too.
const outsideProgram = `package main

import (
	"context"
	"fmt"
	"time"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/idem/dynamostore"
	"github.com/aivax-examples/idempotent-callback/idem/memstore"
	"github.com/aivax-examples/idempotent-callback/idem/sqlitestore"
)

var (
	_ idem.Store[dynamostore.Client] = nil
	_ = dynamostore.New
	_ = sqlitestore.Open
)

// counted counts the claims that reach the store.
type counted struct {
	idem.Store[memstore.Writes]
	n int
}

func (c *counted) Claim(ctx context.Context, rec idem.Record, w memstore.Writes, now time.Time) (*idem.Record, error) {
	c.n++
	return c.Store.Claim(ctx, rec, w, now)
}

func main() {
	store := &counted{Store: memstore.New()}
	g := &idem.Guard[memstore.Writes]{Store: store, Retention: time.Hour, Cache: idem.NewCache(100),
		Wait: idem.WaitPolicy{Max: time.Second, Initial: time.Millisecond}}
	if err := g.Check(); err != nil {
		panic(err)
	}
	plan := idem.Plan[memstore.Writes](func(idem.Claim) ([]byte, memstore.Writes, error) { return []byte("{\"shipped\":true}"), nil, nil })
	do := func(owner string) idem.Status {
		return g.Do(context.Background(), idem.Call{Tenant: "t", Owner: owner, RequestID: "r", Function: "ship", Arguments: []byte("{}")}, plan).Status
	}
	fmt.Println(do("a"), do("a"), do("b"), store.n)
	bad := idem.Record{Key: "k", State: idem.StateCompleted, Result: []byte("{}")}
	_, err := store.Claim(context.Background(), bad, nil, time.Now())
	fmt.Println(err != nil && (&idem.Guard[memstore.Writes]{Retention: time.Millisecond}).Check() != nil)
}
`
