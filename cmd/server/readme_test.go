package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/testkit/jsonlines"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
)

// section returns the text between <!-- name:begin --> and <!-- name:end -->
// in the README, inside its fenced code block.
func section(t *testing.T, readme, name string) string {
	t.Helper()
	begin, end := "<!-- "+name+":begin -->", "<!-- "+name+":end -->"
	i, j := strings.Index(readme, begin), strings.Index(readme, end)
	if i < 0 || j < i {
		t.Fatalf("README has no %s section", name)
	}
	block := strings.TrimSpace(readme[i+len(begin) : j])
	lines := strings.Split(block, "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[0], "```") || lines[len(lines)-1] != "```" {
		t.Fatalf("README %s section is not one fenced block", name)
	}
	return strings.Join(lines[1:len(lines)-1], "\n") + "\n"
}

// TestReadmeQuickStart starts the local server with the README's run
// command (make run) and replays the README's blocks against it, on a
// fresh database: the curl pair, the metrics scrape, the MCP pair and the
// follow-ups (create, comment, close, get). The responses must be the ones
// the README shows (ids and times aside); a second run of the pair and of
// the follow-ups must answer the stored results.
func TestReadmeQuickStart(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds and starts the server")
	}
	for _, tool := range []string{"bash", "curl", "make"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is needed", tool)
			}
			t.Skipf("%s not installed", tool)
		}
	}
	root := testenv.RepoRoot(t)
	raw, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	if !strings.Contains(strings.SplitN(readme, "\n## ", 2)[0], "make run") {
		t.Fatal("README's first lines do not give `make run`")
	}
	script := section(t, readme, "curl-pair")
	want := strings.Split(strings.TrimSpace(section(t, readme, "curl-output")), "\n")

	// A copy of the repository is the working directory, as a fresh clone
	// is: make run copies config.example.json to config.json there, with its
	// relative store path, unchanged. Only the ports may change, when
	// another process holds the README's (the test logs it).
	dir := copyRepo(t, root)
	addr, metricsAddr := "127.0.0.1:3210", "127.0.0.1:9464"
	if !free(addr) || !free(metricsAddr) {
		addr = fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
		metricsAddr = fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
		t.Logf("the README's ports are taken: listen %s and metrics_listen %s instead; nothing else changed", addr, metricsAddr)
		example, err := os.ReadFile(filepath.Join(dir, "config.example.json"))
		if err != nil {
			t.Fatal(err)
		}
		cfg := strings.Replace(string(example), `"127.0.0.1:3210"`, strconv.Quote(addr), 1)
		cfg = strings.Replace(cfg, `"127.0.0.1:9464"`, strconv.Quote(metricsAddr), 1)
		if cfg == string(example) {
			t.Fatal("config.example.json does not listen on the README's ports")
		}
		if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	var serverLog bytes.Buffer
	server := exec.Command("make", "--no-print-directory", "run")
	server.Dir = dir
	server.Stdout, server.Stderr = &serverLog, &serverLog
	server.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		_ = syscall.Kill(-server.Process.Pid, syscall.SIGINT)
		done := make(chan struct{})
		go func() { _ = server.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = syscall.Kill(-server.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
	t.Cleanup(stop)
	deadline := time.Now().Add(3 * time.Minute)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server did not listen on %s:\n%s", addr, serverLog.String())
		}
		time.Sleep(200 * time.Millisecond)
	}

	script = strings.ReplaceAll(script, "127.0.0.1:3210", addr)
	run := func() string { return runScript(t, "curl pair", dir, script, &serverLog) }

	// Byte for byte what the README shows, once the README's ticket id
	// stands for the one this run minted.
	out := run()
	got := jsonlines.Decode(t, strings.TrimSpace(out))
	shown := jsonlines.Decode(t, strings.Join(want, "\n"))
	if len(got) != 2 || len(shown) != 2 {
		t.Fatalf("curl pair answered %q, README shows %q; want two answers each", out, want)
	}
	id, _ := got[0]["ticket_id"].(string)
	shownID, _ := shown[0]["ticket_id"].(string)
	if id == "" || shownID == "" {
		t.Fatalf("curl pair answered %q, want two answers with a ticket_id", out)
	}
	if out = strings.ReplaceAll(out, id, shownID); out != strings.Join(want, "\n")+"\n" {
		t.Fatalf("curl pair answered (ticket id replaced)\n%s\nREADME shows\n%s", out, strings.Join(want, "\n"))
	}
	// The README's scrape of /metrics shows the pair's two counts.
	scrape := strings.ReplaceAll(section(t, readme, "metrics-curl"), "127.0.0.1:9464", metricsAddr)
	scraped, err := exec.Command("bash", "-euo", "pipefail", "-c", scrape).Output()
	if err != nil {
		t.Fatalf("metrics curl: %v\nserver:\n%s", err, serverLog.String())
	}
	if got, want := strings.TrimSpace(string(scraped)), strings.TrimSpace(section(t, readme, "metrics-output")); got != want {
		t.Fatalf("metrics curl printed\n%s\nREADME shows\n%s", got, want)
	}
	// The README's MCP pair: created, then the same ticket deduplicated,
	// byte for byte as shown once the ticket id is the README's.
	mcpScript := strings.ReplaceAll(section(t, readme, "mcp-curl-pair"), "127.0.0.1:3210", addr)
	mcpWant := strings.TrimSpace(section(t, readme, "mcp-curl-output"))
	mcpOut := runScript(t, "README block", dir, mcpScript, &serverLog)
	mcpID, mcpShownID := mcpTicketID(mcpOut), mcpTicketID(mcpWant)
	if mcpID == "" || mcpShownID == "" || mcpID == id {
		t.Fatalf("MCP pair answered %q; want a new ticket", mcpOut)
	}
	if got := strings.TrimSpace(strings.ReplaceAll(mcpOut, mcpID, mcpShownID)); got != mcpWant {
		t.Fatalf("MCP pair answered (ticket id replaced)\n%s\nREADME shows\n%s", got, mcpWant)
	}
	// The README's follow-ups: create, add_comment, close_ticket, then
	// get_ticket, byte for byte as shown once ids and times are the
	// README's.
	followScript := strings.ReplaceAll(section(t, readme, "followups-curl"), "127.0.0.1:3210", addr)
	followWant := strings.TrimSpace(section(t, readme, "followups-output"))
	followOut := strings.TrimSpace(runScript(t, "README follow-ups block", dir, followScript, &serverLog))
	if got, want := sameShape(followOut), sameShape(followWant); got != want {
		t.Fatalf("follow-ups block answered\n%s\nREADME shows\n%s\n(compared with ids and times replaced:\n%s\n%s)", followOut, followWant, got, want)
	}
	if n := len(jsonlines.Decode(t, followOut)); n != 4 {
		t.Fatalf("follow-ups block printed %d answers, want 4 (create, comment, close, get)", n)
	}
	// Run again, the three writes are repeats: the same ids, deduplicated.
	followAgain := strings.TrimSpace(runScript(t, "README follow-ups block", dir, followScript, &serverLog))
	if got, want := followAgain, strings.Replace(followOut, `"deduplicated":false`, `"deduplicated":true`, 3); got != want {
		t.Fatalf("follow-ups block run again answered\n%s\nwant the stored answers\n%s", got, want)
	}
	again := jsonlines.Decode(t, strings.TrimSpace(run()))
	if len(again) != 2 {
		t.Fatalf("second run answered %v, want two answers", again)
	}
	for i, o := range again {
		if o["deduplicated"] != true || o["status"] != "created" {
			t.Fatalf("second run, call %d: %v, want the stored ticket", i+1, o)
		}
	}
	stop()
	if !strings.Contains(serverLog.String(), `"msg":"stopped"`) {
		t.Errorf("the server did not shut down gracefully:\n%s", serverLog.String())
	}
	// The database is where the shipped config's relative path says: the
	// copy's own folder.
	if _, err := os.Stat(filepath.Join(dir, "tickets.sqlite")); err != nil {
		t.Errorf("no tickets.sqlite in the working directory: %v", err)
	}
}

// copyRepo copies the repository's files (tracked, and new ones not
// ignored: what a fresh clone of this tree holds) into a temporary folder.
func copyRepo(t *testing.T, root string) string {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	dir := t.TempDir()
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		src := filepath.Join(root, name)
		info, err := os.Lstat(src)
		if err != nil || !info.Mode().IsRegular() {
			continue // deleted from the work tree, or not a file
		}
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(dst), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// free reports whether nothing listens on addr.
func free(addr string) bool {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

var (
	uuidPattern = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	timePattern = regexp.MustCompile(`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z`)
)

// sameShape is text with each distinct UUID replaced by its rank of first
// appearance (ID1, ID2, ...) and each time by TIME: two runs of a block
// print the same shape when they differ only in the ids and times minted,
// and an id that should repeat (the ticket's, the comment's) does.
func sameShape(text string) string {
	rank := map[string]string{}
	text = uuidPattern.ReplaceAllStringFunc(text, func(id string) string {
		if _, ok := rank[id]; !ok {
			rank[id] = fmt.Sprintf("ID%d", len(rank)+1)
		}
		return rank[id]
	})
	return timePattern.ReplaceAllString(text, "TIME")
}

// mcpTicketID is the ticket_id of the structured content of the first
// JSON-RPC answer in lines; "" when it has none.
func mcpTicketID(lines string) string {
	var answer struct {
		Result struct {
			StructuredContent map[string]any `json:"structuredContent"`
		} `json:"result"`
	}
	_ = json.Unmarshal([]byte(strings.SplitN(lines, "\n", 2)[0]), &answer)
	id, _ := answer.Result.StructuredContent["ticket_id"].(string)
	return id
}

// TestRequestIDConflictRowSaysWhen: the responses tables of
// docs/operations.md and docs/contract.md say, as the contract's row does, that another user's
// request_id answers request_id_conflict only when it gives the same
// operation key: under the arguments policy, the same arguments too.
func TestRequestIDConflictRowSaysWhen(t *testing.T) {
	for _, name := range []string{"../../docs/operations.md", "../../docs/contract.md"} {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		var rows []string
		for line := range strings.SplitSeq(string(b), "\n") {
			if strings.HasPrefix(line, "|") && strings.Contains(line, `"code":"request_id_conflict"`) {
				rows = append(rows, line)
			}
		}
		if len(rows) != 1 {
			t.Fatalf("%s: %d table rows answer request_id_conflict, want 1", name, len(rows))
		}
		for _, says := range []string{"another user of the tenant", "`arguments` policy", "the same arguments", "under `request`", "| 403 |"} {
			if !strings.Contains(rows[0], says) {
				t.Errorf("%s: the request_id_conflict row does not say %q:\n%s", name, says, rows[0])
			}
		}
	}
}

// runScript runs a README block, named what in a failure, with bash in
// dir and returns what it printed.
func runScript(t *testing.T, what, dir, script string, serverLog *bytes.Buffer) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s\nserver:\n%s", what, err, stderr.String(), serverLog.String())
	}
	return string(out)
}
