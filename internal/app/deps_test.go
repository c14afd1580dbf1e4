package app

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/aivax-examples/idempotent-callback/"

// deps lists the in-module packages pkg links, built with tags.
func deps(t *testing.T, pkg, tags string) map[string]bool {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go not on PATH: %v", err)
	}
	cmd := exec.Command(goBin, "list", "-deps", "-tags", tags, "./"+pkg)
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps -tags %q ./%s: %v", tags, pkg, err)
	}
	set := map[string]bool{}
	for _, p := range strings.Fields(string(out)) {
		if rest, ok := strings.CutPrefix(p, module); ok {
			set[rest] = true
		}
	}
	return set
}

// TestEachLambdaLinksOnlyWhatItRuns: with the deployed build's tags and
// without them, the callback function links no helpdesk client, no
// delivery wiring and no local, operator or test-support code; the
// delivery function links no HTTP door, function URL adapter, nonce
// check, MCP or token code, and no local, operator or test-support code;
// both link the runtime's logger and SSM reader (internal/lambdart). Each also links what it runs, so a wrong package path
// here cannot pass unnoticed.
func TestEachLambdaLinksOnlyWhatItRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	// Neither links local or operator code, nor test support
	// (internal/testkit/: every shared test helper, fake and suite).
	local := []string{"internal/app/localserver", "internal/app/localstore", "internal/app/operator", "cmd/", "internal/testkit/"}
	rules := []struct {
		pkg       string
		forbidden []string // a package is forbidden when it is one of these or under one ending in "/"
		needed    []string
	}{
		{"functions/callback",
			append([]string{"internal/helpdesk/", "internal/app/destination", "internal/deliverylambda"}, local...),
			[]string{"internal/app/doors", "internal/httpapi", "internal/nonce", "internal/mcpdoor", "internal/jwtauth", "internal/usercache",
				"internal/lambdaurl", "internal/lambdart"}},
		{"functions/delivery",
			append([]string{"internal/httpapi", "internal/httpapi/", "internal/mcpdoor", "internal/jwtauth", "internal/app/doors",
				"internal/usercache", "internal/nonce", "internal/lambdaurl"}, local...),
			[]string{"internal/app/destination", "internal/helpdesk/zendesk", "internal/helpdesk/webhook", "internal/helpdesk/linear", "internal/deliverylambda",
				"internal/lambdart"}},
	}
	for _, tags := range []string{"", "lambda.norpc,nosqlite"} {
		for _, r := range rules {
			got := deps(t, r.pkg, tags)
			for p := range got {
				for _, f := range r.forbidden {
					if p == f || (strings.HasSuffix(f, "/") && strings.HasPrefix(p, f)) {
						t.Errorf("%s (tags %q) links %s", r.pkg, tags, p)
					}
				}
			}
			for _, n := range r.needed {
				if !got[n] {
					t.Errorf("%s (tags %q) does not link %s, which it runs", r.pkg, tags, n)
				}
			}
		}
	}
}

// TestNoProductCodeImportsTestKit: shared test support lives under
// internal/testkit and only tests import it: no package outside it
// imports it from a non-test file, with either tag set. A package that
// did would be test support in a product folder, or ship test code.
func TestNoProductCodeImportsTestKit(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go not on PATH: %v", err)
	}
	for _, tags := range []string{"", "lambda.norpc,nosqlite"} {
		cmd := exec.Command(goBin, "list", "-tags", tags, "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...")
		cmd.Dir = "../.."
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -tags %q ./...: %v", tags, err)
		}
		seen := 0
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			f := strings.Fields(line)
			pkg, _ := strings.CutPrefix(f[0], module)
			if strings.HasPrefix(pkg, "internal/testkit/") {
				continue
			}
			seen++
			for _, imp := range f[1:] {
				if rest, ok := strings.CutPrefix(imp, module); ok && strings.HasPrefix(rest, "internal/testkit/") {
					t.Errorf("%s (tags %q) imports %s outside its tests", pkg, tags, rest)
				}
			}
		}
		if seen < 20 {
			t.Fatalf("go list -tags %q ./... listed %d packages outside internal/testkit; want the whole module", tags, seen)
		}
	}
}

// TestConfigImportsNothingInModule: config maps names to values; the
// packages that apply the settings check them and set their defaults, so
// it links no package of this module but itself, with either tag set.
func TestConfigImportsNothingInModule(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	for _, tags := range []string{"", "lambda.norpc,nosqlite"} {
		got := deps(t, "internal/config", tags)
		if !got["internal/config"] {
			t.Fatalf("go list -deps (tags %q) does not list internal/config itself: %v", tags, got)
		}
		for p := range got {
			if p != "internal/config" {
				t.Errorf("internal/config (tags %q) links %s", tags, p)
			}
		}
	}
}

// TestMetricsKnowsNoDomainNorTransport: the metrics package (with its EMF
// recorder) and the Prometheus recorder link neither the domain (core, delivery) nor the transport
// (httpapi): the composition roots give them the labels' closed sets.
func TestMetricsKnowsNoDomainNorTransport(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	forbidden := []string{"internal/core", "internal/delivery", "internal/httpapi"}
	for _, pkg := range []string{"internal/metrics", "internal/metrics/prom"} {
		got := deps(t, pkg, "")
		if !got[pkg] {
			t.Fatalf("go list -deps ./%s does not list %s itself", pkg, pkg)
		}
		for p := range got {
			for _, f := range forbidden {
				if p == f || strings.HasPrefix(p, f+"/") {
					t.Errorf("%s links %s", pkg, p)
				}
			}
		}
	}
}

// TestMainsOnlyWire: every program's main.go stays under 40 lines (read
// the configuration, call its composition root, start); the building
// lives in the Lambda's handler.go beside it, or in the local program's
// package under internal/app.
func TestMainsOnlyWire(t *testing.T) {
	mains, err := filepath.Glob("../../*/*/main.go")
	if err != nil {
		t.Fatal(err)
	}
	if len(mains) < 5 {
		t.Fatalf("found %d main.go files, want the 5 programs': %v", len(mains), mains)
	}
	for _, m := range mains {
		b, err := os.ReadFile(m)
		if err != nil {
			t.Fatal(err)
		}
		if n := bytes.Count(b, []byte("\n")); n >= 40 {
			t.Errorf("%s has %d lines; a main.go only wires (under 40)", m, n)
		}
	}
}

// TestSettingsCheckedOnce: a setting is checked once on the way in, where
// the program reads it, and carried checked. For each check below it
// parses the module's non-test Go files, lists the functions that call
// the check, and fails when one calls it twice, when one of them reaches
// another through the module's function calls (so one path would run the
// check twice: a composition root checking, then a builder it calls
// checking again), or when the check has no caller (so a renamed check
// cannot pass unnoticed). Calls are resolved by name: a package's
// functions, and the functions of the packages it imports; method calls
// are not followed.
func TestSettingsCheckedOnce(t *testing.T) {
	checks := []string{
		"idem.ParsePolicy",
		"internal/app/doors.CheckSettings",
		"internal/app/doors.CheckHookKey",
		"internal/app/doors.CheckMCP",
		"internal/app/localstore.CheckSettings",
		"internal/app/localserver.CheckSettings",
		"internal/core.CheckUserIDs",
		"internal/nonce.CheckKey",
	}
	calls := callGraph(t, "../..")
	callers := map[string]map[string]int{} // check → caller → calls
	for caller, callees := range calls {
		for _, callee := range callees {
			for _, c := range checks {
				if callee == c {
					if callers[c] == nil {
						callers[c] = map[string]int{}
					}
					callers[c][caller]++
				}
			}
		}
	}
	reaches := func(from, to string) bool {
		seen := map[string]bool{from: true}
		stack := []string{from}
		for len(stack) > 0 {
			f := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for _, g := range calls[f] {
				if g == to {
					return true
				}
				if !seen[g] {
					seen[g] = true
					stack = append(stack, g)
				}
			}
		}
		return false
	}
	for _, c := range checks {
		if len(callers[c]) == 0 {
			t.Errorf("%s has no caller outside tests; a renamed check belongs in this list", c)
		}
		for a, n := range callers[c] {
			if n > 1 {
				t.Errorf("%s calls %s %d times", a, c, n)
			}
			for b := range callers[c] {
				if a != b && reaches(a, b) {
					t.Errorf("%s is checked twice on one path: %s calls it, and so does %s, which %s reaches", c, a, b, a)
				}
			}
		}
	}
}

// callGraph maps each function of the module's non-test files under root
// ("pkg.Func" or "pkg.Recv.Method", pkg relative to the module) to the
// module's functions it calls by name (pkg.F through an import, or F of
// its own package).
func callGraph(t *testing.T, root string) map[string][]string {
	t.Helper()
	graph := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(rel)
		imports := map[string]string{}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			rest, ok := strings.CutPrefix(p, module)
			if !ok {
				continue
			}
			name := rest[strings.LastIndex(rest, "/")+1:]
			if imp.Name != nil {
				name = imp.Name.Name
			}
			imports[name] = rest
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			name := pkg + "." + fn.Name.Name
			if fn.Recv != nil && len(fn.Recv.List) == 1 {
				typ := fn.Recv.List[0].Type
				if star, ok := typ.(*ast.StarExpr); ok {
					typ = star.X
				}
				if ix, ok := typ.(*ast.IndexExpr); ok {
					typ = ix.X
				}
				if id, ok := typ.(*ast.Ident); ok {
					name = pkg + "." + id.Name + "." + fn.Name.Name
				}
			}
			if _, ok := graph[name]; !ok {
				graph[name] = nil // a function that calls nothing is still one
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				switch fun := call.Fun.(type) {
				case *ast.Ident:
					graph[name] = append(graph[name], pkg+"."+fun.Name)
				case *ast.SelectorExpr:
					if x, ok := fun.X.(*ast.Ident); ok && imports[x.Name] != "" {
						graph[name] = append(graph[name], imports[x.Name]+"."+fun.Sel.Name)
					}
				}
				return true
			})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(graph) < 200 {
		t.Fatalf("parsed %d functions under %s; want the whole module", len(graph), root)
	}
	return graph
}

// TestNoTraceBuildLinksNoExporter: built with -tags notrace (the build
// make bench measures tracing's cost against), neither function links
// the OpenTelemetry SDK's OTLP exporter; built without it, both do, so
// the comparison measures what it names.
func TestNoTraceBuildLinksNoExporter(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go not on PATH: %v", err)
	}
	const exporter = "go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	for _, pkg := range []string{"functions/callback", "functions/delivery"} {
		for tags, want := range map[string]bool{"lambda.norpc,nosqlite": true, "lambda.norpc,nosqlite,notrace": false} {
			cmd := exec.Command(goBin, "list", "-deps", "-tags", tags, "./"+pkg)
			cmd.Dir = "../.."
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("go list -deps -tags %q ./%s: %v", tags, pkg, err)
			}
			if got := slices.Contains(strings.Fields(string(out)), exporter); got != want {
				t.Errorf("%s (tags %q) links the OTLP exporter: %v, want %v", pkg, tags, got, want)
			}
		}
	}
}
