package localserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aivax-examples/idempotent-callback/internal/app/localstore"
	"github.com/aivax-examples/idempotent-callback/internal/config"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
)

// signingEndpoint is a stand-in DynamoDB endpoint that records the access
// key each request was signed with (DynamoDB Local keeps one database per
// access key unless started with -sharedDb).
func signingEndpoint(t *testing.T) (string, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var keys []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		if _, after, ok := strings.Cut(auth, "Credential="); ok {
			key, _, _ := strings.Cut(after, "/")
			mu.Lock()
			keys = append(keys, key)
			mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"__type":"com.amazonaws.dynamodb.v20120810#ResourceNotFoundException","message":"no table"}`))
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), keys...) }
}

func localDynamoCallback(t *testing.T, endpoint string) {
	t.Helper()
	cfg := config.Local{
		Common:         config.Common{Policy: "arguments", Retention: 3600e9, MaxBodyBytes: 65536, MinCost: 4, MaxCost: 10},
		Store:          config.StoreSettings{Kind: "dynamodb", Table: "tickets-local", Endpoint: endpoint, Region: "us-east-1"},
		Users:          map[string]config.User{"user-a": {TenantID: "tenant-a", UserID: "alice"}},
		InsecureNoAuth: true,
	}
	h, closer, err := LocalServer(context.Background(), checked(t, cfg), discard(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	body := `{"function":{"name":"create_ticket","content":{"title":"t"}},"context":{"externalUserId":"user-a","metadata":{"request_id":"r"}}}`
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/callback", strings.NewReader(body)))
}

// With an endpoint configured, the local server signs with the caller's
// own credentials (the ones the AWS CLI used to create the table), not
// with credentials of its own.
func TestLocalDynamoUsesTheCallersCredentials(t *testing.T) {
	testenv.IsolateAWSEnv(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDUSEROWNKEY")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	endpoint, keys := signingEndpoint(t)
	localDynamoCallback(t, endpoint)
	got := keys()
	if len(got) == 0 {
		t.Fatal("no request reached the endpoint")
	}
	for _, k := range got {
		if k != "AKIDUSEROWNKEY" {
			t.Fatalf("signed with %q, want the caller's AKIDUSEROWNKEY", k)
		}
	}
}

// Without credentials anywhere in the chain, dummy ones are used.
func TestLocalDynamoFallsBackToDummyCredentials(t *testing.T) {
	testenv.IsolateAWSEnv(t)
	endpoint, keys := signingEndpoint(t)
	localDynamoCallback(t, endpoint)
	got := keys()
	if len(got) == 0 || got[0] != localstore.DummyAccessKeyID {
		t.Fatalf("signed with %q, want the dummy %q", got, localstore.DummyAccessKeyID)
	}
}

// A user id longer than the service accepts cannot be configured: the
// local programs refuse it at start (core.CheckUserIDs), without
// repeating the id.
func TestOverlongUserIDRefused(t *testing.T) {
	long := strings.Repeat("u", 1025)
	c, err := config.ParseFile([]byte(`{"users":{"` + long + `":{"tenant_id":"t","user_id":"u"}}}`))
	if err == nil {
		_, err = CheckSettings(c)
	}
	if err == nil || strings.Contains(err.Error(), long) {
		t.Fatalf("err = %v; want an error that does not repeat the id", err)
	}
}

// TestListenersRefused: what has no authentication listens on loopback
// only: insecure_no_auth with a non-loopback listen, and a metrics_listen
// that is not loopback, stop the server at start with one line naming the
// setting; loopback ones are accepted.
func TestListenersRefused(t *testing.T) {
	check := func(file string) error {
		c, err := config.ParseFile([]byte(file))
		if err == nil {
			_, err = CheckSettings(c)
		}
		return err
	}
	for _, tc := range []struct{ file, want string }{
		{`{"listen":"0.0.0.0:3210","insecure_no_auth":true}`, "insecure_no_auth"},
		{`{"listen":":3210","insecure_no_auth":true}`, "insecure_no_auth"},
		{`{"listen":"tickets.example.org:3210","insecure_no_auth":true}`, "insecure_no_auth"},
		{`{"metrics_listen": "0.0.0.0:9464"}`, "metrics_listen"},
		{`{"metrics_listen": "[::]:9464"}`, "metrics_listen"},
		{`{"metrics_listen": "192.0.2.10:9464"}`, "metrics_listen"},
		{`{"metrics_listen": "metrics.example.com:9464"}`, "metrics_listen"},
	} {
		err := check(tc.file)
		if err == nil || !strings.HasPrefix(err.Error(), "config:") || strings.ContainsAny(err.Error(), "\r\n") ||
			!strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want one line starting config: naming %s", tc.file, err, tc.want)
		}
	}
	for _, file := range []string{
		`{"listen":"127.0.0.1:3210","insecure_no_auth":true}`,
		`{"listen":"localhost:3210","insecure_no_auth":true}`,
		`{"listen":"[::1]:3210","insecure_no_auth":true}`,
		`{"insecure_no_auth":true}`,
		`{"metrics_listen": ":9464"}`,
		`{"metrics_listen": "[::1]:9464"}`,
		`{"metrics_listen": "localhost:0"}`,
	} {
		if err := check(file); err != nil {
			t.Errorf("%s: %v; want it accepted", file, err)
		}
	}
}

// The development issuer's key file, as store.path, is taken from the
// config file's folder when relative and from the home folder after "~/",
// whatever folder the server starts in; SQLite's ":memory:" is refused
// naming mcp.dev_key.
func TestDevKeyPathIsTheConfigFilesFolder(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	dir := t.TempDir()
	t.Chdir(t.TempDir())
	for devKey, want := range map[string]string{
		"k.pem":          filepath.Join(dir, "k.pem"),
		"keys/k.pem":     filepath.Join(dir, "keys", "k.pem"),
		"~/k.pem":        filepath.Join(home, "k.pem"),
		"/etc/aivax.pem": "/etc/aivax.pem",
		":memory:":       "",
	} {
		path := filepath.Join(dir, "config.json")
		file := `{"hook_key":"k","mcp":{"issuer":"http://127.0.0.1:3210/dev-issuer","audience":"http://127.0.0.1:3210/mcp",` +
			`"dev_key":"` + devKey + `"}}`
		if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := config.LoadFile(path)
		if err == nil {
			var s Settings
			s, err = CheckSettings(c)
			c = s.File
		}
		if want == "" {
			if err == nil || !strings.Contains(err.Error(), "mcp.dev_key") {
				t.Errorf("dev_key %q: %v; want an error naming mcp.dev_key", devKey, err)
			}
			continue
		}
		if err != nil || c.MCP.DevKey != want {
			t.Errorf("dev_key %q: %q, %v; want %q", devKey, c.MCP.DevKey, err, want)
		}
	}
}
