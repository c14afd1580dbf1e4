package localserver

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/internal/config"
)

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// localConfig is a local configuration on a temporary SQLite file.
func localConfig(t *testing.T, hookKey string) config.Local {
	t.Helper()
	return config.Local{
		Common: config.Common{
			Policy: string(idem.PolicyArguments), Retention: time.Hour, MaxBodyBytes: 64 << 10, MinCost: 4, MaxCost: 12,
		},
		Listen:  "127.0.0.1:0",
		Store:   config.StoreSettings{Kind: "sqlite", Path: filepath.Join(t.TempDir(), "tickets.sqlite")},
		HookKey: hookKey,
		Users: map[string]config.User{
			"user-a": {TenantID: "tenant-a", UserID: "alice"},
			"user-d": {TenantID: "tenant-a", UserID: "dave", Disabled: true},
		},
	}
}

// checked is cfg checked as the local server checks its file at start.
func checked(t *testing.T, cfg config.Local) Settings {
	t.Helper()
	s, err := CheckSettings(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A missing folder on the SQLite path is created, as a newcomer's
// "data/tickets.sqlite" needs.
func TestLocalCreatesTheStoreFolder(t *testing.T) {
	cfg := localConfig(t, "k")
	cfg.Store.Path = filepath.Join(t.TempDir(), "missing", "dir", "tickets.sqlite")
	_, closer, err := LocalServer(context.Background(), checked(t, cfg), discard(), nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = closer.Close()
	if _, err := os.Stat(cfg.Store.Path); err != nil {
		t.Fatalf("no database at %s: %v", cfg.Store.Path, err)
	}
}

func TestLocalRefused(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*config.Local)
		wantErr string
	}{
		{"store.kind nope -> store.kind", func(c *config.Local) { c.Store.Kind = "nope" }, "store.kind"},
		{"hook key of 73 bytes -> hook key", func(c *config.Local) { c.HookKey = strings.Repeat("k", 73) }, "hook key"},
		{"sqlite path under a file, not a folder -> store.path and the path", func(c *config.Local) {
			file := filepath.Join(t.TempDir(), "a-file")
			if err := os.WriteFile(file, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			c.Store.Path = filepath.Join(file, "tickets.sqlite")
		}, filepath.Join("a-file", "tickets.sqlite") + ": cannot"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := localConfig(t, "k")
			tc.mutate(&cfg)
			// As Main starts: the file's check, then the server on it.
			var h http.Handler
			var closer io.Closer
			s, err := CheckSettings(cfg)
			if err == nil {
				h, closer, err = LocalServer(context.Background(), s, discard(), nil)
			}
			if err == nil {
				if closer != nil {
					_ = closer.Close()
				}
				t.Fatalf("got %T and no error", h)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %q does not contain %q", err, tc.wantErr)
			}
		})
	}
}

// TestServeGraceful: Serve reports its address, serves, and on cancel
// lets a request in flight finish with 200 before returning nil.
func TestServeGraceful(t *testing.T) {
	started := make(chan struct{})
	var once sync.Once
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			once.Do(func() { close(started) })
			time.Sleep(300 * time.Millisecond)
		}
		_, _ = io.WriteString(w, "ok "+r.URL.Path)
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addrc := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, "127.0.0.1:0", h, discard(), func(a net.Addr) { addrc <- a }) }()
	var base string
	select {
	case a := <-addrc:
		base = "http://" + a.String()
	case err := <-done:
		t.Fatalf("Serve returned before ready: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("ready never called")
	}

	get := func(path string) (int, string, error) {
		resp, err := http.Get(base + path)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	if status, body, err := get("/fast"); err != nil || status != 200 || body != "ok /fast" {
		t.Fatalf("GET /fast: %d %q %v", status, body, err)
	}

	type result struct {
		status int
		body   string
		err    error
	}
	slow := make(chan result, 1)
	go func() {
		s, b, err := get("/slow")
		slow <- result{s, b, err}
	}()
	<-started
	cancel() // shut down with /slow in flight
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve: %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after cancel")
	}
	r := <-slow
	if r.err != nil || r.status != 200 || r.body != "ok /slow" {
		t.Errorf("in-flight /slow during shutdown: %d %q %v, want 200 \"ok /slow\"", r.status, r.body, r.err)
	}
	if _, _, err := get("/fast"); err == nil {
		t.Error("server still answers after Serve returned")
	}
}

func TestServeListenError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var buf bytes.Buffer
	called := false
	err = Serve(context.Background(), ln.Addr().String(), http.NotFoundHandler(),
		slog.New(slog.NewTextHandler(&buf, nil)), func(net.Addr) { called = true })
	if err == nil || !strings.Contains(err.Error(), "listen") {
		t.Errorf("address in use: %v, want a listen error", err)
	}
	if called {
		t.Error("ready called although nothing listens")
	}
}
