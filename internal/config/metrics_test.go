package config

import (
	"testing"

	"github.com/aivax-examples/idempotent-callback/internal/testkit/configtest"
)

func TestMetricsListen(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{}`, ""}, // absent: no metrics listener
		{`{"metrics_listen": ""}`, ""},
		{`{"metrics_listen": "127.0.0.1:9464"}`, "127.0.0.1:9464"},
		{`{"metrics_listen": ":9464"}`, "127.0.0.1:9464"}, // no host: loopback, not every interface
		{`{"metrics_listen": "[::1]:9464"}`, "[::1]:9464"},
		{`{"metrics_listen": "localhost:0"}`, "localhost:0"},
	} {
		got, err := ParseFile([]byte(c.in))
		if err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		if got.MetricsListen != c.want {
			t.Errorf("%s: MetricsListen %q, want %q", c.in, got.MetricsListen, c.want)
		}
	}
	for _, in := range []string{
		`{"metrics_listen": "9464"}`,
		`{"metrics_listen": "127.0.0.1"}`,
		`{"metrics_listen": "127.0.0.1:"}`,
		`{"listen": "127.0.0.1:3210", "metrics_listen": "127.0.0.1:3210"}`,
		`{"metrics_listen": 9464}`,
		// Loopback only (/metrics has no authentication): TestListenersRefused
		// in internal/app/localserver.
	} {
		_, err := ParseFile([]byte(in))
		configtest.OneLine(t, err, "metrics_listen")
	}
}

func TestMetricsNamespaceFromEnv(t *testing.T) {
	c, err := FromEnv(env(map[string]string{"TABLE_NAME": "t", "METRICS_NAMESPACE": "Team/Callbacks"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.MetricsNamespace != "Team/Callbacks" {
		t.Errorf("MetricsNamespace %q", c.MetricsNamespace)
	}
	// Unset, it is metrics.DefaultNamespace: see TestDefaultsAreTheOwners.
}
