package config

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestDeliveryBlock(t *testing.T) {
	c, err := ParseFile([]byte(`{"hook_key":"k","delivery":{"kind":"zendesk","url":"https://acme.zendesk.com",
		"email":"agent@acme.com","token":"tok-123"}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := Delivery{Kind: "zendesk", URL: "https://acme.zendesk.com", Email: "agent@acme.com", Token: "tok-123",
		MaxAttempts: 8, Timeout: 10 * time.Second}
	if c.Delivery == nil || *c.Delivery != want {
		t.Fatalf("delivery = %+v, want %+v", c.Delivery, want)
	}
	c, err = ParseFile([]byte(`{"hook_key":"k","delivery":{"kind":"webhook","url":"http://127.0.0.1:9/hook?x=1",
		"secret":"whsec_c2VjcmV0LXMz","lookup":true,"max_attempts":3,"timeout":"2s"}}`))
	if err != nil {
		t.Fatal(err)
	}
	want = Delivery{Kind: "webhook", URL: "http://127.0.0.1:9/hook?x=1", Secret: "whsec_c2VjcmV0LXMz", Lookup: true, MaxAttempts: 3, Timeout: 2 * time.Second}
	if c.Delivery == nil || *c.Delivery != want {
		t.Fatalf("delivery = %+v, want %+v", c.Delivery, want)
	}
	if c, err := ParseFile([]byte(`{"hook_key":"k"}`)); err != nil || c.Delivery != nil {
		t.Fatalf("no block: %+v, %v; want no delivery", c.Delivery, err)
	}
}

func TestDeliveryBlockRefused(t *testing.T) {
	const zd = `"kind":"zendesk","url":"https://acme.zendesk.com","email":"a@b.c","token":"tok-SECRET"`
	const wh = `"kind":"webhook","url":"https://hooks.example/in","secret":"whsec_SECRETSECRETSECRETSECRETSECRETSE"`
	tests := []struct{ block, want string }{
		{`{"url":"https://x.example","secret":"whsec_c2VjcmV0"}`, "delivery.kind"},
		{`{"kind":"jira","url":"https://x.example"}`, "delivery.kind"},
		{`{"kind":"zendesk","url":"https://acme.zendesk.com","email":"a@b.c"}`, "email and token"},
		{`{"kind":"zendesk","url":"https://acme.zendesk.com","token":"tok-SECRET"}`, "email and token"},
		{`{` + zd + `,"secret":"whsec_SECRETSECRETSECRETSECRETSECRETSE"}`, "for kind webhook"},
		{`{"kind":"webhook","url":"https://hooks.example/in"}`, "needs secret"},
		{`{` + wh + `,"token":"tok-SECRET"}`, "for kind zendesk"},
		{`{"kind":"webhook","secret":"whsec_SECRETSECRETSECRETSECRETSECRETSE"}`, "delivery.url"},
		{`{"kind":"webhook","url":"http://hooks.example/in","secret":"whsec_SECRETSECRETSECRETSECRETSECRETSE"}`, "must be https"},
		{`{"kind":"webhook","url":"ftp://127.0.0.1/in","secret":"whsec_SECRETSECRETSECRETSECRETSECRETSE"}`, "must be https"},
		{`{"kind":"webhook","url":"https://user:pw-SECRET@hooks.example/in","secret":"whsec_SECRETSECRETSECRETSECRETSECRETSE"}`, "user info"},
		{`{"kind":"webhook","url":"/relative","secret":"whsec_SECRETSECRETSECRETSECRETSECRETSE"}`, "delivery.url"},
		{`{` + wh + `,"max_attempts":0}`, "delivery.max_attempts"},
		{`{` + wh + `,"max_attempts":101}`, "delivery.max_attempts"},
		{`{` + wh + `,"max_attempts":2.5}`, "delivery.max_attempts"},
		{`{` + wh + `,"timeout":"10"}`, "delivery.timeout"},
		{`{` + wh + `,"timeout":"-1s"}`, "delivery.timeout"},
		{`{` + wh + `,"timeout":"1m"}`, "delivery.timeout"},
		{`{` + wh + `,"timeout":"1ms"}`, "delivery.timeout"},
		{`{` + wh + `,"retries":3}`, `"retries"`},
		{`"webhook"`, "delivery"},
	}
	for _, tc := range tests {
		t.Run(tc.want+" "+tc.block, func(t *testing.T) {
			_, err := ParseFile([]byte(`{"hook_key":"k","delivery":` + tc.block + `}`))
			checkOneLine(t, err, tc.want)
			if err != nil && strings.Contains(err.Error(), "SECRET") {
				t.Errorf("error %q shows a credential", err)
			}
		})
	}
}

func TestDeliveryLoopbackHTTP(t *testing.T) {
	for _, u := range []string{"http://127.0.0.1:8080/hook", "http://localhost/hook", "http://[::1]:9/x", "http://LOCALHOST/x"} {
		if err := (Delivery{Kind: "webhook", URL: u, Secret: "whsec_c2VjcmV0"}).Validate(); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
}

func TestDeliveryNeverShowsCredentials(t *testing.T) {
	d := Delivery{Kind: "zendesk", URL: "https://acme.zendesk.com/?t=q-SECRET", Email: "a@b.c", Token: "tok-SECRET", Secret: "whsec_SECRETSECRETSECRETSECRETSECRETSE"}
	var logged strings.Builder
	slog.New(slog.NewTextHandler(&logged, nil)).Info("x", "delivery", d)
	for _, s := range []string{d.String(), fmt.Sprintf("%v %+v %#v %s", d, d, d, d), logged.String()} {
		if strings.Contains(s, "SECRET") {
			t.Errorf("%q shows a credential", s)
		}
		if !strings.Contains(s, "acme.zendesk.com") {
			t.Errorf("%q does not show the URL", s)
		}
	}
}

func denv(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestDeliveryFromEnv(t *testing.T) {
	noParam := func(string) (string, error) { return "", errors.New("no SSM here") }
	t.Run("none", func(t *testing.T) {
		for _, kind := range []string{"", "none"} {
			_, ok, err := DeliveryFromEnv(denv(map[string]string{"DELIVERY_KIND": kind}), noParam)
			if ok || err != nil {
				t.Errorf("kind %q: ok=%t err=%v, want no delivery", kind, ok, err)
			}
		}
	})
	t.Run("zendesk defaults", func(t *testing.T) {
		d, ok, err := DeliveryFromEnv(denv(map[string]string{
			"DELIVERY_KIND": "zendesk", "DELIVERY_URL": "https://acme.zendesk.com",
			"DELIVERY_SECRET": `{"email":"agent@acme.com","token":"tok-123"}`,
		}), noParam)
		if err != nil || !ok {
			t.Fatalf("ok=%t err=%v", ok, err)
		}
		want := Delivery{Kind: "zendesk", URL: "https://acme.zendesk.com", Email: "agent@acme.com", Token: "tok-123",
			MaxAttempts: 8, Timeout: 10 * time.Second, SweepConcurrency: DefaultDeliverySweepConcurrency}
		if d != want {
			t.Errorf("got %+v, want %+v", d, want)
		}
	})
	t.Run("parameter wins and is read once", func(t *testing.T) {
		calls := 0
		d, ok, err := DeliveryFromEnv(denv(map[string]string{
			"DELIVERY_KIND": "webhook", "DELIVERY_URL": "http://127.0.0.1:9/hook",
			"DELIVERY_SECRET_PARAMETER": "/aivax/delivery", "DELIVERY_SECRET": `{"secret":"whsec_ZnJvbS1lbnY="}`,
			"DELIVERY_LOOKUP": "true", "DELIVERY_MAX_ATTEMPTS": "3", "DELIVERY_TIMEOUT": "2s",
			"DELIVERY_SWEEP_CONCURRENCY": "4",
		}), func(name string) (string, error) {
			calls++
			if name != "/aivax/delivery" {
				t.Errorf("parameter name %q", name)
			}
			return `{"secret":"whsec_ZnJvbS1zc20="}` + "\n", nil
		})
		if err != nil || !ok {
			t.Fatalf("ok=%t err=%v", ok, err)
		}
		if d.Secret != "whsec_ZnJvbS1zc20=" || !d.Lookup || d.MaxAttempts != 3 || d.Timeout != 2*time.Second || d.SweepConcurrency != 4 || calls != 1 {
			t.Errorf("got %+v after %d parameter reads", d, calls)
		}
	})
	bad := []struct {
		name, field string
		vars        map[string]string
	}{
		{"unknown kind", "DELIVERY_KIND", map[string]string{"DELIVERY_KIND": "jira"}},
		{"no url", "DELIVERY_URL", map[string]string{"DELIVERY_KIND": "webhook", "DELIVERY_SECRET": `{"secret":"s3cr3tvalue00000"}`}},
		{"http not loopback", "must be https", map[string]string{"DELIVERY_KIND": "webhook", "DELIVERY_URL": "http://tickets.example/hook", "DELIVERY_SECRET": `{"secret":"s3cr3tvalue00000"}`}},
		{"no secret", "DELIVERY_SECRET", map[string]string{"DELIVERY_KIND": "webhook", "DELIVERY_URL": "https://tickets.example/hook"}},
		{"secret not json", "DELIVERY_SECRET", map[string]string{"DELIVERY_KIND": "webhook", "DELIVERY_URL": "https://tickets.example/hook", "DELIVERY_SECRET": `s3cr3tvalue00000`}},
		{"wrong credentials for kind", "zendesk needs", map[string]string{"DELIVERY_KIND": "zendesk", "DELIVERY_URL": "https://acme.zendesk.com", "DELIVERY_SECRET": `{"secret":"s3cr3tvalue00000"}`}},
		{"unknown credential field", "DELIVERY_SECRET", map[string]string{"DELIVERY_KIND": "webhook", "DELIVERY_URL": "https://tickets.example/hook", "DELIVERY_SECRET": `{"secret":"x","pasword":"s3cr3tvalue00000"}`}},
		{"attempts zero", "DELIVERY_MAX_ATTEMPTS", map[string]string{"DELIVERY_KIND": "webhook", "DELIVERY_URL": "https://tickets.example/hook", "DELIVERY_SECRET": `{"secret":"s3cr3tvalue00000"}`, "DELIVERY_MAX_ATTEMPTS": "0"}},
		{"attempts too many", "DELIVERY_MAX_ATTEMPTS", map[string]string{"DELIVERY_KIND": "webhook", "DELIVERY_URL": "https://tickets.example/hook", "DELIVERY_SECRET": `{"secret":"s3cr3tvalue00000"}`, "DELIVERY_MAX_ATTEMPTS": "101"}},
		{"timeout too long", "timeout", map[string]string{"DELIVERY_KIND": "webhook", "DELIVERY_URL": "https://tickets.example/hook", "DELIVERY_SECRET": `{"secret":"s3cr3tvalue00000"}`, "DELIVERY_TIMEOUT": "1m"}},
		{"timeout not a duration", "DELIVERY_TIMEOUT", map[string]string{"DELIVERY_KIND": "webhook", "DELIVERY_URL": "https://tickets.example/hook", "DELIVERY_SECRET": `{"secret":"s3cr3tvalue00000"}`, "DELIVERY_TIMEOUT": "10"}},
		{"lookup not bool", "DELIVERY_LOOKUP", map[string]string{"DELIVERY_KIND": "webhook", "DELIVERY_URL": "https://tickets.example/hook", "DELIVERY_SECRET": `{"secret":"s3cr3tvalue00000"}`, "DELIVERY_LOOKUP": "yes please"}},
		{"sweep concurrency zero", "DELIVERY_SWEEP_CONCURRENCY", map[string]string{"DELIVERY_KIND": "webhook", "DELIVERY_URL": "https://tickets.example/hook", "DELIVERY_SECRET": `{"secret":"s3cr3tvalue00000"}`, "DELIVERY_SWEEP_CONCURRENCY": "0"}},
		{"sweep concurrency too many", "DELIVERY_SWEEP_CONCURRENCY", map[string]string{"DELIVERY_KIND": "webhook", "DELIVERY_URL": "https://tickets.example/hook", "DELIVERY_SECRET": `{"secret":"s3cr3tvalue00000"}`, "DELIVERY_SWEEP_CONCURRENCY": "257"}},
		{"sweep concurrency not a number", "DELIVERY_SWEEP_CONCURRENCY", map[string]string{"DELIVERY_KIND": "webhook", "DELIVERY_URL": "https://tickets.example/hook", "DELIVERY_SECRET": `{"secret":"s3cr3tvalue00000"}`, "DELIVERY_SWEEP_CONCURRENCY": "lots"}},
		{"parameter fails", "DELIVERY_SECRET_PARAMETER", map[string]string{"DELIVERY_KIND": "webhook", "DELIVERY_URL": "https://tickets.example/hook", "DELIVERY_SECRET_PARAMETER": "/p"}},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			_, ok, err := DeliveryFromEnv(denv(c.vars), noParam)
			if err == nil || ok {
				t.Fatalf("ok=%t err=nil, want an error naming %s", ok, c.field)
			}
			if !strings.Contains(err.Error(), c.field) {
				t.Errorf("error %q does not name %s", err, c.field)
			}
			if strings.Contains(err.Error(), "s3cr3t") {
				t.Errorf("error %q shows the secret", err)
			}
		})
	}
}

func TestDeliveryValidate(t *testing.T) {
	ok := []Delivery{
		{Kind: "zendesk", URL: "https://acme.zendesk.com", Email: "a@b", Token: "t"},
		{Kind: "webhook", URL: "http://localhost:8080/hook", Secret: "whsec_c2VjcmV0", Lookup: true, MaxAttempts: 100, Timeout: 20 * time.Second},
		{Kind: "webhook", URL: "http://[::1]:8080/hook", Secret: "whsec_c2VjcmV0", MaxAttempts: 1},
	}
	for _, d := range ok {
		if err := d.Validate(); err != nil {
			t.Errorf("%v: %v", d, err)
		}
	}
	bad := []Delivery{
		{Kind: "", URL: "https://x.example", Secret: "whsec_c2VjcmV0"},
		{Kind: "zendesk", URL: "https://acme.zendesk.com", Email: "a@b"},
		{Kind: "zendesk", URL: "https://acme.zendesk.com", Email: "a@b", Token: "t", Lookup: true},
		{Kind: "webhook", URL: "https://x.example"},
		{Kind: "webhook", URL: "ftp://x.example", Secret: "whsec_c2VjcmV0"},
		{Kind: "webhook", URL: "http://10.0.0.1/hook", Secret: "whsec_c2VjcmV0"},
		{Kind: "webhook", URL: "https://x.example", Secret: "whsec_c2VjcmV0", MaxAttempts: 101},
		{Kind: "webhook", URL: "https://x.example", Secret: "whsec_c2VjcmV0", MaxAttempts: -1},
		{Kind: "webhook", URL: "https://x.example", Secret: "whsec_c2VjcmV0", Timeout: -time.Second},
		{Kind: "webhook", URL: "https://x.example", Secret: "whsec_c2VjcmV0", Timeout: 21 * time.Second},
	}
	for _, d := range bad {
		if err := d.Validate(); err == nil {
			t.Errorf("%v: accepted", d)
		}
	}
}

// TestDeliveryLogsNoCredentials: printing or logging a Delivery of either
// kind, in any of the usual ways, shows neither the token nor the secret
// nor a token in the URL's query.
func TestDeliveryLogsNoCredentials(t *testing.T) {
	for _, d := range []Delivery{
		{Kind: "zendesk", URL: "https://acme.zendesk.com", Email: "agent@acme.com", Token: "TOKEN-SHOULD-NOT-SHOW"},
		{Kind: "webhook", URL: "https://tickets.example/hook?key=QUERY-SHOULD-NOT-SHOW", Secret: "SECRET-SHOULD-NOT-SHOW"},
	} {
		var buf bytes.Buffer
		log := slog.New(slog.NewJSONHandler(&buf, nil))
		log.Info("start", "delivery", d)
		slog.New(slog.NewTextHandler(&buf, nil)).Info("start", "delivery", d)
		fmt.Fprintf(&buf, "%v %+v %#v %s", d, d, d, d)
		out := buf.String()
		for _, secret := range []string{"SHOULD-NOT-SHOW"} {
			if strings.Contains(out, secret) {
				t.Errorf("credential shown:\n%s", out)
			}
		}
		if !strings.Contains(out, d.Kind) {
			t.Errorf("the kind should still show:\n%s", out)
		}
	}
}

// TestDeliverySecretMustDecode: a webhook secret that is not whsec_ and
// base64 stops the program at start, with an error naming the field and
// not the value, from the config file and from the environment alike.
func TestDeliverySecretMustDecode(t *testing.T) {
	for _, bad := range []string{"plain-shared-secret", "whsec_not base64!", "whsec_"} {
		err := Delivery{Kind: "webhook", URL: "https://hooks.example/in", Secret: bad}.Validate()
		if err == nil || !strings.Contains(err.Error(), "delivery.secret") || (len(bad) > 6 && strings.Contains(err.Error(), bad)) {
			t.Errorf("%q: %v", bad, err)
		}
		env := map[string]string{"DELIVERY_KIND": "webhook", "DELIVERY_URL": "https://hooks.example/in",
			"DELIVERY_SECRET": `{"secret":"` + bad + `"}`}
		_, ok, err := DeliveryFromEnv(func(k string) string { return env[k] }, nil)
		if ok || err == nil || !strings.Contains(err.Error(), "secret") || (len(bad) > 6 && strings.Contains(err.Error(), bad)) {
			t.Errorf("env %q: %v %v", bad, ok, err)
		}
	}
	if err := (Delivery{Kind: "webhook", URL: "https://hooks.example/in", Secret: "c2VjcmV0"}).Validate(); err != nil {
		t.Errorf("a secret without the optional prefix: %v", err)
	}
}
