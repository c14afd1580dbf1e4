// Command benchreport is `make bench`: it runs the benchmarks, the load
// and the cold-start measurements of the service module (the repository
// root) with `go test -json`, keeps their raw output in a directory, and
// writes docs/benchmarks.md from it through package report. It is a module
// of its own, so that the service's go.mod does not list golang.org/x/perf;
// `make bench` builds it and runs it from the repository root.
//
//	benchreport [-out docs/benchmarks.md] [-count 5] [-base REV] [-keep DIR]
//	benchreport -from DIR [-out FILE]   # render recorded results only
//
// It refuses a working tree with uncommitted changes (the report names the
// revision it measured) unless -allow-dirty is given, and then the document
// says so at the top. With -base REV it also builds REV's handler, key and
// SQLite store benchmarks and runs them alternately with this revision's.
// Needs the tools of `make tools` (DynamoDB Local, aws-lambda-rie) and Java.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/aivax-examples/idempotent-callback/benchreport/report"
	"github.com/aivax-examples/idempotent-callback/internal/bench/results"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
}

type options struct {
	out, base, keep, from string
	count, coldRuns       int
	cell                  time.Duration
	allowDirty            bool
}

func run(args []string) error {
	var o options
	fs := flag.NewFlagSet("benchreport", flag.ContinueOnError)
	fs.StringVar(&o.out, "out", "docs/benchmarks.md", "the report to write")
	fs.IntVar(&o.count, "count", 5, "runs of each benchmark")
	fs.StringVar(&o.base, "base", "", "git revision to compare the handler, key derivation and SQLite store with (empty: none)")
	fs.StringVar(&o.keep, "keep", "", "keep the raw results in this directory (default: a temporary one, removed)")
	fs.StringVar(&o.from, "from", "", "render the report from this directory of recorded results; measure nothing")
	fs.BoolVar(&o.allowDirty, "allow-dirty", false, "measure a tree with uncommitted changes (the report says so at the top)")
	fs.DurationVar(&o.cell, "cell", 2*time.Second, "duration of each throughput cell")
	fs.IntVar(&o.coldRuns, "coldstart-runs", 7, "cold starts per build")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if o.count < 1 || o.coldRuns < 1 || o.cell <= 0 {
		return errors.New("-count, -coldstart-runs and -cell must be positive")
	}
	if o.from != "" {
		return render(o.from, o.out)
	}
	root, err := gitOut("", "rev-parse", "--show-toplevel")
	if err != nil {
		return fmt.Errorf("not in a git work tree: %w", err)
	}
	if err := os.Chdir(root); err != nil {
		return err
	}
	dir := o.keep
	if dir == "" {
		if dir, err = os.MkdirTemp("", "benchreport-"); err != nil {
			return err
		}
		defer func() { _ = os.RemoveAll(dir) }()
	} else if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	if err := measure(o, root, dir); err != nil {
		return err
	}
	return render(dir, o.out)
}

func render(dir, out string) error {
	rp, err := report.Load(dir)
	if err != nil {
		return fmt.Errorf("reading the results in %s: %w", dir, err)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o750); err != nil {
		return err
	}
	if err := report.WriteFile(rp, out); err != nil {
		return err
	}
	logf("wrote %s", out)
	return nil
}

// measure runs everything and leaves the raw results and meta.json in dir.
func measure(o options, root, dir string) error {
	start := time.Now()
	dirty, err := checkClean(root, o.allowDirty)
	if err != nil {
		return err
	}
	for _, tool := range []string{".cache/dynamodb-local/DynamoDBLocal.jar", ".cache/bin/aws-lambda-rie"} {
		if _, err := os.Stat(filepath.Join(root, tool)); err != nil {
			return fmt.Errorf("%s is missing: run make tools first", tool)
		}
	}
	if _, err := exec.LookPath("java"); err != nil {
		return errors.New("java is not on PATH (DynamoDB Local needs it)")
	}
	rev, err := gitOut(root, "rev-parse", "--short=12", "HEAD")
	if err != nil {
		return err
	}
	meta := report.Meta{Revision: rev, Dirty: dirty, Count: o.count, CPUs: runtime.NumCPU()}
	machine(&meta)
	// Tests that need DynamoDB Local or the emulator fail instead of skipping.
	env := append(os.Environ(), "CI=true")

	work, err := os.MkdirTemp("", "benchreport-bin-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(work) }()
	r := &runner{root: root, dir: dir, work: work, env: env, meta: &meta}

	// One test binary per package and revision, each run in its package
	// directory (as go test does) under test2json.
	cur := map[string]string{}
	keys := keyPackage(root)
	for _, pkg := range []string{"internal/httpapi", keys, "internal/nonce", "internal/bench"} {
		if cur[pkg], err = r.compile(root, pkg, "cur"); err != nil {
			return err
		}
	}
	base := map[string]string{}
	baseRoot, baseKeys := "", ""
	if o.base != "" {
		full, err := gitOut(root, "rev-parse", "--short=12", o.base+"^{commit}")
		if err != nil {
			return fmt.Errorf("-base %s: %w", o.base, err)
		}
		meta.Base = full
		if baseRoot, err = r.checkoutBase(full); err != nil {
			return err
		}
		baseKeys = keyPackage(baseRoot)
		for _, pkg := range []string{"internal/httpapi", baseKeys, "internal/bench"} {
			if base[pkg], err = r.compile(baseRoot, pkg, "base"); err != nil {
				return err
			}
		}
	}
	count := strconv.Itoa(o.count)
	alternating := ""
	if o.base != "" {
		alternating = ", alternating with " + meta.Base
	}
	overhead := []string{"-test.run", "^$", "-test.bench", "^BenchmarkHandlerOverhead$", "-test.benchmem", "-test.count", "1"}
	opkey := []string{"-test.run", "^$", "-test.bench", "^Benchmark(Canonical|Key)$", "-test.benchmem", "-test.count", "1"}
	sqlite := []string{"-test.run", "^$", "-test.bench", "^BenchmarkSQLite$", "-test.count", "1"}
	// The tracing variants in the same rounds, right before the figures
	// without tracing, so that both see the same machine.
	overheadTracing := []string{"-test.run", "^$", "-test.bench", "^BenchmarkHandlerOverheadTracing$", "-test.benchmem", "-test.count", "1"}
	r.note("go test -json -run '^$' -bench '^BenchmarkHandlerOverheadTracing$' -benchmem -count 1 ./internal/httpapi   # " + count + " times, each right before BenchmarkHandlerOverhead")
	r.note("go test -json -run '^$' -bench '^BenchmarkHandlerOverhead$' -benchmem -count 1 ./internal/httpapi   # " + count + " times" + alternating)
	r.note("go test -json -run '^$' -bench '^Benchmark(Canonical|Key)$' -benchmem -count 1 ./" + keys + "   # " + count + " times" + alternating)
	for i := range o.count {
		logf("handler overhead, round %d of %d", i+1, o.count)
		if err := r.bin(root, "internal/httpapi", cur, report.FileOverheadTracing, overheadTracing); err != nil {
			return err
		}
		if err := r.bin(root, "internal/httpapi", cur, report.FileOverhead, overhead); err != nil {
			return err
		}
		if err := r.bin(root, keys, cur, report.FileOpkey, opkey); err != nil {
			return err
		}
		if o.base != "" {
			if err := r.bin(baseRoot, "internal/httpapi", base, report.FileOverheadBase, overhead); err != nil {
				return err
			}
			if err := r.bin(baseRoot, baseKeys, base, report.FileOpkeyBase, opkey); err != nil {
				return err
			}
		}
	}
	r.note("go test -json -run '^$' -bench '^BenchmarkStages$' -benchmem -benchtime 300ms -count " + count + " ./internal/httpapi")
	if err := r.bin(root, "internal/httpapi", cur, report.FileStages, []string{"-test.run", "^$", "-test.bench", "^BenchmarkStages$",
		"-test.benchmem", "-test.benchtime", "300ms", "-test.count", count}); err != nil {
		return err
	}
	logf("bcrypt")
	r.note("go test -json -run '^$' -bench '^BenchmarkVerify$' -benchmem -count " + count + " ./internal/nonce")
	if err := r.bin(root, "internal/nonce", cur, report.FileBCrypt, []string{"-test.run", "^$", "-test.bench", "^BenchmarkVerify$",
		"-test.benchmem", "-test.count", count}); err != nil {
		return err
	}
	logf("full path against the raw store: DynamoDB Local")
	r.note("go test -json -run '^$' -bench '^BenchmarkDynamoDB$' -count " + count + " -timeout 10m ./internal/bench")
	if err := r.bin(root, "internal/bench", cur, report.FileDynamoDB, []string{"-test.run", "^$", "-test.bench", "^BenchmarkDynamoDB$",
		"-test.count", count, "-test.timeout", "10m"}); err != nil {
		return err
	}
	r.note("go test -json -run '^$' -bench '^BenchmarkSQLite$' -count 1 ./internal/bench   # " + count + " times" + alternating)
	for i := range o.count {
		logf("full path against the raw store: SQLite, round %d of %d", i+1, o.count)
		if err := r.bin(root, "internal/bench", cur, report.FileSQLite, sqlite); err != nil {
			return err
		}
		if o.base != "" {
			if err := r.bin(baseRoot, "internal/bench", base, report.FileSQLiteBase, sqlite); err != nil {
				return err
			}
		}
	}
	logf("DynamoDB requests per callback")
	if err := r.goTest(report.FileRoundTrips, nil, "-count=1", "-v", "-run", "^TestRoundTripsPerCallback$", "./internal/store/dynamo"); err != nil {
		return err
	}
	if err := measureMCP(r, count); err != nil {
		return err
	}
	if err := measureDelivery(r, dir, count); err != nil {
		return err
	}
	if err := measureStreamLambda(r, count); err != nil {
		return err
	}
	logf("throughput")
	if err := r.goTest("throughput.test.json", []string{results.ThroughputEnv + "=" + filepath.Join(dir, report.FileThroughput),
		results.CellDurationEnv + "=" + o.cell.String()},
		"-count=1", "-timeout", "10m", "-run", "^TestThroughput$", "./internal/bench"); err != nil {
		return err
	}
	if err := measureInRegion(r, dir); err != nil {
		return err
	}
	logf("cold starts")
	if err := r.goTest("coldstart.test.json", []string{results.ColdStartEnv + "=" + filepath.Join(dir, report.FileColdStart),
		results.ColdStartRunsEnv + "=" + strconv.Itoa(o.coldRuns)},
		"-count=1", "-timeout", "10m", "-run", "^TestColdStart$", "./internal/bench"); err != nil {
		return err
	}
	meta.LoadEnd = loadAverage()
	meta.Seconds = int(time.Since(start).Seconds())
	return results.WriteJSON(filepath.Join(dir, report.FileMeta), meta)
}

// measureMCP runs the MCP door's benchmarks (its handler overhead without
// JWT, one JWT verification with a cached key) and counts its DynamoDB
// requests per operation.
func measureMCP(r *runner, count string) error {
	logf("MCP door: handler overhead, JWT verification, DynamoDB requests")
	if err := r.goTest(report.FileMCPOverhead, nil, "-run", "^$", "-bench", "^BenchmarkMCPHandlerOverhead$", "-benchmem",
		"-count", count, "./internal/mcpdoor"); err != nil {
		return err
	}
	if err := r.goTest(report.FileJWT, nil, "-run", "^$", "-bench", "^BenchmarkVerify$", "-benchmem",
		"-count", count, "./internal/jwtauth"); err != nil {
		return err
	}
	return r.goTest(report.FileMCPRoundTrips, nil, "-count=1", "-v", "-run", "^TestMCPRoundTrips$", "./internal/mcpdoor")
}

// measureDelivery runs the delivery benchmarks and the delivery tests whose
// counts the report shows.
func measureDelivery(r *runner, dir, count string) error {
	logf("DynamoDB requests per delivered ticket")
	if err := r.goTest(report.FileDeliveryRoundTrips, nil, "-count=1", "-v", "-run", "^TestDeliveryRoundTrips$", "./internal/store/dynamo"); err != nil {
		return err
	}
	if err := r.goTest(report.FileStreamRoundTrips, nil, "-count=1", "-v", "-run", "^TestStreamCallsPerTicket$", "./internal/deliverylambda"); err != nil {
		return err
	}
	for _, b := range []struct{ file, pkg string }{
		{report.FileDeliveryWorkerSQLite, "./internal/store/sqlite"},
		{report.FileDeliveryWorkerDynamoDB, "./internal/store/dynamo"},
	} {
		logf("delivery: local worker, %s", b.pkg)
		if err := r.goTest(b.file, nil, "-run", "^$", "-bench", "^BenchmarkDeliveryLocalWorker$", "-benchtime", "500x",
			"-count", count, "-timeout", "10m", b.pkg); err != nil {
			return err
		}
	}
	logf("delivery: local worker to Linear, without and with faults")
	if err := r.goTest(report.FileDeliveryWorkerLinear, nil, "-run", "^$", "-bench", "^BenchmarkDeliveryLocalWorkerLinear$", "-benchtime", "500x",
		"-count", count, "-timeout", "10m", "./internal/store/sqlite"); err != nil {
		return err
	}
	logf("delivery: stream path")
	if err := r.goTest(report.FileDeliveryStream, nil, "-run", "^$", "-bench", "^BenchmarkDeliveryStreamPath$", "-benchtime", "200x",
		"-count", count, "-timeout", "10m", "./functions/delivery"); err != nil {
		return err
	}
	logf("delivery: scheduled sweep over a backlog")
	if err := r.goTest(report.FileDeliverySweep, nil, "-run", "^$", "-bench", "^BenchmarkDeliverySweepDrain$", "-benchtime", "1x",
		"-count", count, "-timeout", "20m", "./functions/delivery"); err != nil {
		return err
	}
	for _, m := range []struct{ file, pkg string }{
		{report.FileDeliveryMatrixSQLite, "./internal/store/sqlite"},
		{report.FileDeliveryMatrixDynamoDB, "./internal/store/dynamo"},
	} {
		logf("delivery: failure matrix, %s", m.pkg)
		if err := r.goTest(strings.TrimSuffix(m.file, ".json")+".test.json", []string{results.DeliveryMatrixEnv + "=" + filepath.Join(dir, m.file)},
			"-count=1", "-timeout", "10m", "-run", "^TestDeliveryFailureMatrix$", m.pkg); err != nil {
			return err
		}
	}
	return nil
}

// measureInRegion runs TestInRegion: the callback path and its floors
// through the proxy in front of DynamoDB Local, without and with the
// in-region latency model.
func measureInRegion(r *runner, dir string) error {
	logf("in-region latency model")
	return r.goTest("inregion.test.json", []string{results.InRegionEnv + "=" + filepath.Join(dir, report.FileInRegion)},
		"-count=1", "-timeout", "10m", "-run", "^TestInRegion$", "./internal/bench")
}

// measureStreamLambda runs the stream path under Lambda's polling: steady
// commits, tickets each followed by a comment and a close, then a burst of
// 1,000 tickets committed at once.
func measureStreamLambda(r *runner, count string) error {
	logf("delivery: stream path under Lambda's polling")
	if err := r.goTest(report.FileDeliveryStreamLambda, nil, "-run", "^$", "-bench", "^BenchmarkDeliveryStreamLambda$", "-benchtime", "200x",
		"-count", count, "-timeout", "10m", "./functions/delivery"); err != nil {
		return err
	}
	logf("delivery: follow-ups after their ticket through the stream")
	if err := r.goTest(report.FileDeliveryStreamFollowUps, nil, "-run", "^$", "-bench", "^BenchmarkDeliveryStreamFollowUps$", "-benchtime", "200x",
		"-count", count, "-timeout", "10m", "./functions/delivery"); err != nil {
		return err
	}
	logf("delivery: a burst of 1,000 tickets through the stream")
	return r.goTest(report.FileDeliveryStreamBurst, nil, "-run", "^$", "-bench", "^BenchmarkDeliveryStreamBurst$", "-benchtime", "1x",
		"-count", count, "-timeout", "20m", "./functions/delivery")
}

// checkClean reports whether the tree at root has uncommitted changes
// (untracked files included: they can change what is built), and refuses
// them unless allowDirty.
func checkClean(root string, allowDirty bool) (dirty bool, err error) {
	status, err := gitOut(root, "status", "--porcelain")
	if err != nil {
		return false, err
	}
	if status != "" && !allowDirty {
		return true, fmt.Errorf("the working tree has uncommitted changes; commit them (the report names the revision it measured) or pass -allow-dirty:\n%s", status)
	}
	return status != "", nil
}

type runner struct {
	root, dir, work string
	env             []string
	meta            *report.Meta
}

// note records a command for the report, with temporary paths elided.
func (r *runner) note(cmd string) {
	cmd = strings.ReplaceAll(cmd, r.dir, "$RESULTS")
	r.meta.Commands = append(r.meta.Commands, strings.ReplaceAll(cmd, r.work, "$TMP"))
}

// compile builds pkg's test binary in module root.
func (r *runner) compile(root, pkg, tag string) (string, error) {
	bin := filepath.Join(r.work, strings.ReplaceAll(pkg, "/", "_")+"."+tag+".test")
	logf("go test -c ./%s (%s)", pkg, tag)
	cmd := exec.Command("go", "test", "-c", "-o", bin, "./"+pkg)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = root, r.env, os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go test -c ./%s in %s: %w", pkg, root, err)
	}
	return bin, nil
}

// bin runs a compiled test binary in its package directory under
// test2json, appending the events to file.
func (r *runner) bin(root, pkg string, bins map[string]string, file string, args []string) error {
	cmd := exec.Command("go", append([]string{"tool", "test2json", "-t", "-p", pkg, bins[pkg], "-test.v=test2json"}, args...)...)
	cmd.Dir = filepath.Join(root, pkg)
	return r.capture(cmd, file)
}

// goTest runs go test -json with extra environment, appending to file.
func (r *runner) goTest(file string, env []string, args ...string) error {
	shown := strings.Join(env, " ")
	if shown != "" {
		shown += " "
	}
	r.note(shown + "go test -json " + strings.Join(quote(args), " "))
	cmd := exec.Command("go", append([]string{"test", "-json"}, args...)...)
	cmd.Dir = r.root
	cmd.Env = append(append([]string{}, r.env...), env...)
	return r.capture(cmd, file)
}

func (r *runner) capture(cmd *exec.Cmd, file string) error {
	if cmd.Env == nil {
		cmd.Env = r.env
	}
	f, err := os.OpenFile(filepath.Join(r.dir, file), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	var tail bytes.Buffer
	cmd.Stdout = io.MultiWriter(f, &tail)
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w\n%s", strings.Join(cmd.Args, " "), err, lastLines(tail.String(), 40))
	}
	return nil
}

// checkoutBase extracts rev into a directory and gives it this revision's
// internal/bench and the test helpers it needs: the store benchmarks use
// only the stores' public API, so the base runs the same benchmark code
// against its own store.
func (r *runner) checkoutBase(rev string) (string, error) {
	dir := filepath.Join(r.work, "base")
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", err
	}
	archive := exec.Command("git", "archive", rev)
	archive.Dir = r.root
	tar := exec.Command("tar", "-x", "-C", dir)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		return "", err
	}
	tar.Stdin = pipe
	if err := tar.Start(); err != nil {
		return "", err
	}
	if err := archive.Run(); err != nil {
		return "", fmt.Errorf("git archive %s: %w", rev, err)
	}
	if err := tar.Wait(); err != nil {
		return "", err
	}
	for _, d := range []string{"internal/bench", "internal/testkit/testenv"} {
		if err := os.RemoveAll(filepath.Join(dir, d)); err != nil {
			return "", err
		}
		if err := os.CopyFS(filepath.Join(dir, d), os.DirFS(filepath.Join(r.root, d))); err != nil {
			return "", err
		}
	}
	// A base older than internal/testkit keeps its own callback helper at
	// internal/callbacktest; the benchmarks import it from its testkit path,
	// so the base's own copy (built against the base's API) goes there.
	if _, err := os.Stat(filepath.Join(dir, "internal/testkit/callbacktest")); errors.Is(err, fs.ErrNotExist) {
		if err := os.CopyFS(filepath.Join(dir, "internal/testkit/callbacktest"), os.DirFS(filepath.Join(dir, "internal/callbacktest"))); err != nil {
			return "", err
		}
	}
	// A base that keeps the table's definition in its own package
	// (internal/store/dynamo/tableschema) gets the names testenv takes from
	// internal/store/dynamo, as aliases of that package's.
	if _, err := os.Stat(filepath.Join(dir, "internal/store/dynamo/tableschema")); err == nil {
		if err := os.WriteFile(filepath.Join(dir, "internal/store/dynamo/tableschema_base.go"), []byte(baseSchemaAliases), 0o600); err != nil {
			return "", err
		}
	}
	r.note("git archive " + rev + " | tar -x -C $TMP/base   # with this revision's internal/bench, internal/testkit/testenv")
	return dir, nil
}

// baseSchemaAliases is the file checkoutBase adds to a base whose table
// definition is the package internal/store/dynamo/tableschema.
const baseSchemaAliases = `package dynamo

import "github.com/aivax-examples/idempotent-callback/internal/store/dynamo/tableschema"

const PartitionKey = tableschema.PartitionKey

var (
	CreateTable = tableschema.CreateTable
	EnableTTL   = tableschema.EnableTTL
)
`

// machine fills in what the run ran on.
func machine(m *report.Meta) {
	m.CPU = "unknown"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	m.Go = firstLine(exec.Command("go", "version").CombinedOutput())
	m.Java = firstLine(exec.Command("java", "-version").CombinedOutput())
	m.OS = firstLine(exec.Command("uname", "-srm").CombinedOutput())
	tmp := os.TempDir()
	m.TempFS = firstLine(exec.Command("stat", "-f", "-c", "%T", tmp).CombinedOutput())
	m.LoadStart = loadAverage()
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "n/a"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

func firstLine(b []byte, err error) string {
	if err != nil && len(b) == 0 {
		return "unknown"
	}
	l, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return l
}

func gitOut(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	b, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(b)), nil
}

func quote(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if strings.ContainsAny(a, "^$*|() ") {
			a = "'" + a + "'"
		}
		out[i] = a
	}
	return out
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[bench] "+format+"\n", args...)
}

// keyPackage is the package of the key benchmarks (BenchmarkCanonical,
// BenchmarkKey) in the tree at root: idem, or internal/opkey in a
// revision that still has that package.
func keyPackage(root string) string {
	if fi, err := os.Stat(filepath.Join(root, "internal", "opkey")); err == nil && fi.IsDir() {
		return "internal/opkey"
	}
	return "idem"
}
