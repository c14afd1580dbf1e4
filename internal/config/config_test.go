package config

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/testkit/configtest"
)

// env turns a map into a getenv.
func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestFromEnvDefaults(t *testing.T) {
	c, err := FromEnv(env(map[string]string{"TABLE_NAME": "tickets"}))
	if err != nil {
		t.Fatal(err)
	}
	// The settings whose default belongs to another package are zero,
	// that package's default; defaults_test.go checks what they come to.
	want := Lambda{
		Common:    Common{Retention: 24 * time.Hour},
		TableName: "tickets",
	}
	if c != want {
		t.Errorf("defaults:\n got %+v\nwant %+v", c, want)
	}
}

func TestFromEnvAccepted(t *testing.T) {
	tests := []struct {
		name  string
		env   map[string]string
		check func(Lambda) bool
	}{
		{"KEY_POLICY=request", map[string]string{"KEY_POLICY": "request"},
			func(c Lambda) bool { return c.Policy == "request" }},
		{"KEY_POLICY=arguments", map[string]string{"KEY_POLICY": "arguments"},
			func(c Lambda) bool { return c.Policy == "arguments" }},
		{"RETENTION=90m", map[string]string{"RETENTION": "90m"},
			func(c Lambda) bool { return c.Retention == 90*time.Minute }},
		{"HOOK_KEY of 72 bytes", map[string]string{"HOOK_KEY": strings.Repeat("k", 72)},
			func(c Lambda) bool { return len(c.HookKey) == 72 }},
		{"HOOK_KEY_PARAMETER kept", map[string]string{"HOOK_KEY_PARAMETER": "/aivax/hook-key"},
			func(c Lambda) bool { return c.HookKeyParameter == "/aivax/hook-key" }},
		{"NONCE_MIN_COST=NONCE_MAX_COST=9", map[string]string{"NONCE_MIN_COST": "9", "NONCE_MAX_COST": "9"},
			func(c Lambda) bool { return c.MinCost == 9 && c.MaxCost == 9 }},
		{"PUBLIC_URL https", map[string]string{"PUBLIC_URL": "https://example.org"},
			func(c Lambda) bool { return c.PublicURL == "https://example.org" }},
		{"USER_CACHE_TTL/SIZE", map[string]string{"USER_CACHE_TTL": "5s", "USER_CACHE_SIZE": "7"},
			func(c Lambda) bool { return c.UserCacheTTL == 5*time.Second && c.UserCacheSize == 7 }},
		{"RESULT_CACHE_SIZE=7", map[string]string{"RESULT_CACHE_SIZE": "7"},
			func(c Lambda) bool { return c.ResultCacheSize == 7 }},
		{"RESULT_CACHE_SIZE=0 is off", map[string]string{"RESULT_CACHE_SIZE": "0"},
			func(c Lambda) bool { return c.ResultCacheSize == ResultCacheOff }},
		{"RESULT_CACHE_SIZE unset is the default", map[string]string{},
			func(c Lambda) bool { return c.ResultCacheSize == 0 }},
		{"STORE_CALL_TIMEOUT", map[string]string{"STORE_CALL_TIMEOUT": "750ms"},
			func(c Lambda) bool { return c.CallTimeout == 750*time.Millisecond }},
	}
	for _, tc := range tests {
		accepted(t, tc.name, func() (Lambda, error) {
			tc.env["TABLE_NAME"] = "tickets"
			return FromEnv(env(tc.env))
		}, tc.check)
	}
}

// accepted runs a subtest name that reads a configuration without error
// and checks what it read.
func accepted[T any](t *testing.T, name string, read func() (T, error), check func(T) bool) {
	t.Helper()
	t.Run(name, func(t *testing.T) {
		c, err := read()
		if err != nil {
			t.Fatal(err)
		}
		if !check(c) {
			t.Errorf("got %+v", c)
		}
	})
}

// TestFromEnvRefused: the settings this package bounds. Those another
// package checks (KEY_POLICY, HOOK_KEY, the nonce costs) are refused at
// start by doors.CheckSettings: TestCheckedSettingsRefused.
func TestFromEnvRefused(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string // the field the error names
	}{
		{"missing TABLE_NAME -> TABLE_NAME", map[string]string{"TABLE_NAME": ""}, "TABLE_NAME"},
		{"RETENTION=1 day -> RETENTION", map[string]string{"RETENTION": "1 day"}, "RETENTION"},
		{"RETENTION=-1h -> RETENTION", map[string]string{"RETENTION": "-1h"}, "RETENTION"},
		{"RETENTION=0s -> RETENTION", map[string]string{"RETENTION": "0s"}, "RETENTION"},
		{"MAX_BODY_BYTES=abc -> MAX_BODY_BYTES", map[string]string{"MAX_BODY_BYTES": "abc"}, "MAX_BODY_BYTES"},
		{"PUBLIC_URL without scheme -> PUBLIC_URL", map[string]string{"PUBLIC_URL": "example.org/callback"}, "PUBLIC_URL"},
		{"USER_CACHE_TTL=-5s -> USER_CACHE_TTL", map[string]string{"USER_CACHE_TTL": "-5s"}, "USER_CACHE_TTL"},
		{"USER_CACHE_SIZE=0 -> USER_CACHE_SIZE", map[string]string{"USER_CACHE_SIZE": "0"}, "USER_CACHE_SIZE"},
		{"RESULT_CACHE_SIZE=-1 -> RESULT_CACHE_SIZE", map[string]string{"RESULT_CACHE_SIZE": "-1"}, "RESULT_CACHE_SIZE"},
		{"RESULT_CACHE_SIZE=many -> RESULT_CACHE_SIZE", map[string]string{"RESULT_CACHE_SIZE": "many"}, "RESULT_CACHE_SIZE"},
		{"STORE_CALL_TIMEOUT=x -> STORE_CALL_TIMEOUT", map[string]string{"STORE_CALL_TIMEOUT": "x"}, "STORE_CALL_TIMEOUT"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, ok := tc.env["TABLE_NAME"]; !ok {
				tc.env["TABLE_NAME"] = "tickets"
			}
			_, err := FromEnv(env(tc.env))
			configtest.OneLine(t, err, tc.want)
		})
	}
}

func TestParseFileContractExample(t *testing.T) {
	// The configuration file shown in docs/contract.md, Local server.
	c, err := ParseFile([]byte(contractExample(t)))
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:3210" || c.Store.Kind != "sqlite" || c.Store.Path != "tickets.sqlite" ||
		c.HookKey != "local-demo-hook-key" || c.Policy != "arguments" || c.Retention != 24*time.Hour ||
		c.InsecureNoAuth {
		t.Errorf("got %+v", c)
	}
	wantUsers := map[string]User{
		"user-a": {TenantID: "tenant-a", UserID: "alice"},
		"user-d": {TenantID: "tenant-a", UserID: "dave", Disabled: true},
	}
	if len(c.Users) != len(wantUsers) {
		t.Fatalf("users: got %+v, want %+v", c.Users, wantUsers)
	}
	for id, u := range wantUsers {
		if c.Users[id] != u {
			t.Errorf("users.%s: got %+v, want %+v", id, c.Users[id], u)
		}
	}
}

func TestParseFileDefaults(t *testing.T) {
	c, err := ParseFile([]byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	want := Local{ // zero settings: their owners' defaults (defaults_test.go)
		Common: Common{Retention: 24 * time.Hour},
		Listen: "127.0.0.1:3210",
	}
	if c.Common != want.Common || c.Listen != want.Listen ||
		c.HookKey != "" || c.InsecureNoAuth || len(c.Users) != 0 {
		t.Errorf("defaults:\n got %+v\nwant %+v", c, want)
	}
}

func TestParseFileAccepted(t *testing.T) {
	tests := []struct {
		name  string
		file  string
		check func(Local) bool
	}{
		{"insecure_no_auth on 127.0.0.1", `{"listen":"127.0.0.1:3210","insecure_no_auth":true}`,
			func(c Local) bool { return c.InsecureNoAuth }},
		{"insecure_no_auth on localhost", `{"listen":"localhost:3210","insecure_no_auth":true}`,
			func(c Local) bool { return c.InsecureNoAuth }},
		{"insecure_no_auth on [::1]", `{"listen":"[::1]:3210","insecure_no_auth":true}`,
			func(c Local) bool { return c.InsecureNoAuth }},
		{"insecure_no_auth with default listen", `{"insecure_no_auth":true}`,
			func(c Local) bool { return c.InsecureNoAuth && c.Listen == DefaultListen }},
		{"dynamodb with table and endpoint",
			`{"store":{"kind":"dynamodb","table":"tickets","endpoint":"http://127.0.0.1:8000"}}`,
			func(c Local) bool {
				return c.Store == StoreSettings{Kind: "dynamodb", Table: "tickets", Endpoint: "http://127.0.0.1:8000"}
			}},
		{"key_policy request", `{"key_policy":"request"}`,
			func(c Local) bool { return c.Policy == "request" }},
		{"numbers", `{"max_body_bytes":2048,"nonce_min_cost":9,"nonce_max_cost":10}`,
			func(c Local) bool { return c.MaxBodyBytes == 2048 && c.MinCost == 9 && c.MaxCost == 10 }},
		{"public_url http", `{"public_url":"http://127.0.0.1:3210"}`,
			func(c Local) bool { return c.PublicURL == "http://127.0.0.1:3210" }},
	}
	for _, tc := range tests {
		accepted(t, tc.name, func() (Local, error) { return ParseFile([]byte(tc.file)) }, tc.check)
	}
}

// TestParseFileRefused: as TestFromEnvRefused, for the file. The
// listeners' loopback rules are the local server's: TestListenersRefused
// in internal/app/localserver; the store block's are the local store's:
// TestStoreSettingsRefused in internal/app/localstore.
func TestParseFileRefused(t *testing.T) {
	tests := []struct {
		name string
		file string
		want []string // what the error names
	}{
		{"typo hook_kye -> unknown field hook_kye", `{"hook_kye":"k"}`, []string{"unknown field", "hook_kye"}},
		{"typo in store (pth) -> unknown field pth", `{"store":{"kind":"sqlite","pth":"x"}}`, []string{"unknown field", "pth"}},
		{"typo after a first object -> unknown field hook_kye",
			`{"listen":"127.0.0.1:3210"} {"hook_kye":"k"}`, []string{"hook_kye"}},
		{"two JSON values -> more than one JSON value", `{} {}`, []string{"more than one JSON value"}},
		{"hook_key and insecure_no_auth -> insecure_no_auth",
			`{"hook_key":"k","insecure_no_auth":true}`, []string{"insecure_no_auth", "hook_key"}},
		{"user without tenant_id -> users.user-x", `{"users":{"user-x":{"user_id":"x"}}}`, []string{"users.user-x", "tenant_id"}},
		{"user without user_id -> users.user-y", `{"users":{"user-y":{"tenant_id":"t"}}}`, []string{"users.user-y"}},
		{"user id with a newline -> users.<quoted id>", `{"users":{"a\nb":{"user_id":"x"}}}`, []string{"users."}},
		{"listen without port -> listen", `{"listen":"127.0.0.1"}`, []string{"listen"}},
		{"retention -1h -> retention", `{"retention":"-1h"}`, []string{"retention"}},
		{"retention bad -> retention", `{"retention":"soon"}`, []string{"retention"}},
		{"max_body_bytes 1.5 -> max_body_bytes", `{"max_body_bytes":1.5}`, []string{"max_body_bytes"}},
		{"public_url without scheme -> public_url", `{"public_url":"example.org"}`, []string{"public_url"}},
		{"not JSON -> config:", `listen: 1`, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseFile([]byte(tc.file))
			configtest.OneLine(t, err, tc.want...)
		})
	}
}

func TestReadConfigFileMissing(t *testing.T) {
	_, err := LoadFile(t.TempDir() + "/absent.json")
	configtest.OneLine(t, err, "absent.json")
}

// contractExample is the configuration file shown in docs/contract.md,
// Local server: the first json block of that section.
func contractExample(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../docs/contract.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(b), "\n### Local server\n")
	_, block, ok := strings.Cut(section, "```json\n")
	if !ok {
		t.Fatal("docs/contract.md, Local server: no json block")
	}
	block, _, _ = strings.Cut(block, "\n```")
	return block
}
