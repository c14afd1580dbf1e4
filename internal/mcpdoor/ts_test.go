package mcpdoor_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
)

// tsRun is what testdata/tsclient.cjs prints.
type tsRun struct {
	Negotiated string `json:"negotiated"`
	Tools      []struct {
		Name         string          `json:"name"`
		OutputSchema json.RawMessage `json:"outputSchema"`
		Annotations  map[string]any  `json:"annotations"`
	} `json:"tools"`
	First, Second, NoKey, Found struct {
		Structured answer   `json:"structured"`
		IsError    bool     `json:"isError"`
		Text       []string `json:"text"`
	}
	UnknownTool *string `json:"unknownTool"`
}

// TSClientCases are the official TypeScript SDK's clients and revisions
// the door is driven with: the v2 client package on both revisions, and
// the v1 package (which speaks up to 2025-11-25).
var tsClientCases = []struct{ pkg, revision string }{
	{"client", "2026-07-28"}, {"client", "2025-11-25"}, {"sdk", "2025-11-25"},
}

// runTSClient runs testdata/tsclient.cjs against url and checks what it
// saw: the revision it asked for, both tools with output schemas, created
// then deduplicated with one ticket_id, missing_request_id as a tool
// error, get_ticket found, an unknown tool a protocol error.
func runTSClient(t *testing.T, url, token, pkg, revision, requestID string) tsRun {
	t.Helper()
	node, modules := testenv.MCPTSClients(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	script, _ := filepath.Abs(filepath.Join(testenv.RepoRoot(t), "internal", "mcpdoor", "testdata", "tsclient.cjs"))
	cmd := exec.CommandContext(ctx, node, script, url, token, revision, pkg, requestID)
	cmd.Env = append(cmd.Environ(), "MCP_TS_MODULES="+modules)
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("%s %s: %v\n%s", pkg, revision, err, stderr)
	}
	var r tsRun
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("%s %s printed %s: %v", pkg, revision, out, err)
	}
	if r.Negotiated != revision {
		t.Errorf("%s: negotiated %q; want %s", pkg, r.Negotiated, revision)
	}
	if len(r.Tools) != 4 || r.Tools[2].Name != "create_ticket" || len(r.Tools[2].OutputSchema) == 0 || r.Tools[2].Annotations["idempotentHint"] != true {
		t.Errorf("%s %s: tools %+v", pkg, revision, r.Tools)
	}
	f, s := r.First, r.Second
	if f.Structured.Status != "created" || f.Structured.Deduplicated || f.IsError || len(f.Text) != 1 {
		t.Errorf("%s %s: first call %+v", pkg, revision, f)
	}
	if s.Structured.TicketID != f.Structured.TicketID || !s.Structured.Deduplicated || s.IsError {
		t.Errorf("%s %s: repeat %+v; want deduplicated %s", pkg, revision, s, f.Structured.TicketID)
	}
	if r.NoKey.Structured.Error.Code != "missing_request_id" || !r.NoKey.IsError {
		t.Errorf("%s %s: call without request_id %+v", pkg, revision, r.NoKey)
	}
	if r.Found.Structured.Status != "found" || r.Found.IsError {
		t.Errorf("%s %s: get_ticket %+v", pkg, revision, r.Found)
	}
	// The SDK refuses an unknown tool with JSON-RPC invalid params; any
	// other error (one the client raised itself, a transport failure) is
	// not that refusal.
	if got := r.UnknownTool; got == nil || *got != "-32602" {
		t.Errorf("%s %s: an unknown tool: %s; want JSON-RPC error -32602", pkg, revision, jsonText(got))
	}
	return r
}

// TestTypeScriptClients: the official TypeScript SDK's clients, on both
// revisions and every store.
func TestTypeScriptClients(t *testing.T) {
	testenv.MCPTSClients(t)
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, open(t), envOptions{})
			for _, c := range tsClientCases {
				t.Run(c.pkg+"/"+c.revision, func(t *testing.T) {
					runTSClient(t, e.audience, e.token("user-a"), c.pkg, c.revision, "req-ts-"+c.pkg+"-"+c.revision)
				})
			}
			if got := e.store.created.Load(); got != int32(len(tsClientCases)) {
				t.Errorf("%d tickets; want one per client run", got)
			}
		})
	}
}

// jsonText is what the script printed for a member: null, or the text.
func jsonText(s *string) string {
	if s == nil {
		return "null"
	}
	return *s
}
