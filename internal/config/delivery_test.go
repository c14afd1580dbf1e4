package config

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"
)

func TestDeliveryBlock(t *testing.T) {
	c, err := ParseFile([]byte(`{"hook_key":"k","delivery":{"kind":"zendesk","url":"https://acme.zendesk.com",
		"email":"agent@acme.com","token":"tok-123"}}`))
	if err != nil {
		t.Fatal(err)
	}
	// Absent max_attempts and timeout are zero: the engine's and the
	// clients' defaults (TestDefaultsAreTheOwners).
	want := Destination{Kind: "zendesk", URL: "https://acme.zendesk.com", Email: "agent@acme.com", Token: "tok-123"}
	if c.Delivery == nil || *c.Delivery != want {
		t.Fatalf("delivery = %+v, want %+v", c.Delivery, want)
	}
	c, err = ParseFile([]byte(`{"hook_key":"k","delivery":{"kind":"webhook","url":"http://127.0.0.1:9/hook?x=1",
		"secret":"whsec_c2VjcmV0LXMz","lookup":true,"max_attempts":3,"timeout":"2s"}}`))
	if err != nil {
		t.Fatal(err)
	}
	want = Destination{Kind: "webhook", URL: "http://127.0.0.1:9/hook?x=1", Secret: "whsec_c2VjcmV0LXMz", Lookup: true, MaxAttempts: 3, Timeout: 2 * time.Second}
	if c.Delivery == nil || *c.Delivery != want {
		t.Fatalf("delivery = %+v, want %+v", c.Delivery, want)
	}
	if c, err := ParseFile([]byte(`{"hook_key":"k"}`)); err != nil || c.Delivery != nil {
		t.Fatalf("no block: %+v, %v; want no delivery", c.Delivery, err)
	}
}

func TestDeliveryNeverShowsCredentials(t *testing.T) {
	d := Destination{Kind: "zendesk", URL: "https://acme.zendesk.com/?t=q-SECRET", Email: "a@b.c", Token: "tok-SECRET", Secret: "whsec_SECRETSECRETSECRETSECRETSECRETSE"}
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
	t.Run("none", func(t *testing.T) {
		for _, kind := range []string{"", "none"} {
			_, err := DeliveryFromEnv(denv(map[string]string{"TABLE_NAME": "t", "DELIVERY_KIND": kind}))
			if err == nil || !strings.Contains(err.Error(), "DELIVERY_KIND") {
				t.Errorf("kind %q: err=%v, want no delivery (an error naming DELIVERY_KIND)", kind, err)
			}
		}
	})
	t.Run("zendesk defaults", func(t *testing.T) {
		c, err := DeliveryFromEnv(denv(map[string]string{
			"TABLE_NAME": "t", "DELIVERY_KIND": "zendesk", "DELIVERY_URL": "https://acme.zendesk.com",
			"DELIVERY_SECRET": `{"email":"agent@acme.com","token":"tok-123"}`,
		}))
		if err != nil {
			t.Fatal(err)
		}
		// Zero attempts, timeout and sweep concurrency: the owners'
		// defaults (TestDefaultsAreTheOwners).
		want := Destination{Kind: "zendesk", URL: "https://acme.zendesk.com", Email: "agent@acme.com", Token: "tok-123",
			env: true, secretFrom: "DELIVERY_SECRET"}
		if c.Destination != want || c.TableName != "t" {
			t.Errorf("got %+v, want %+v", c, want)
		}
	})
	t.Run("parameter wins", func(t *testing.T) {
		c, err := DeliveryFromEnv(denv(map[string]string{
			"TABLE_NAME": "t", "DELIVERY_KIND": "webhook", "DELIVERY_URL": "http://127.0.0.1:9/hook",
			"DELIVERY_SECRET_PARAMETER": "/aivax/delivery", "DELIVERY_SECRET": `{"secret":"whsec_ZnJvbS1lbnY="}`,
			"DELIVERY_LOOKUP": "true", "DELIVERY_MAX_ATTEMPTS": "3", "DELIVERY_TIMEOUT": "2s",
			"DELIVERY_SWEEP_CONCURRENCY": "4",
		}))
		if err != nil || c.SecretParameter != "/aivax/delivery" || c.Destination.Secret != "" {
			t.Fatalf("got %+v, %v; want the parameter's name and no secret yet", c, err)
		}
		// The composition root reads the parameter once and hands its value over.
		d, err := c.Destination.WithSecret(`{"secret":"whsec_ZnJvbS1zc20="}` + "\n")
		if err != nil {
			t.Fatal(err)
		}
		if d.Secret != "whsec_ZnJvbS1zc20=" || !d.Lookup || d.MaxAttempts != 3 || d.Timeout != 2*time.Second || d.SweepConcurrency != 4 {
			t.Errorf("got %+v", d)
		}
		if _, err := c.Destination.WithSecret(`{"secret":"x","pasword":"s3cr3tvalue00000"}`); err == nil ||
			!strings.Contains(err.Error(), "DELIVERY_SECRET_PARAMETER /aivax/delivery") || strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("a bad parameter value: %v; want an error naming the parameter, not the value", err)
		}
	})
	bad := []struct {
		name, field string
		vars        map[string]string
	}{
		{"no table", "TABLE_NAME", map[string]string{"DELIVERY_KIND": "webhook"}},
		{"unknown kind", "DELIVERY_KIND", map[string]string{"DELIVERY_KIND": "jira"}},
		{"no secret", "DELIVERY_SECRET", map[string]string{"DELIVERY_KIND": "webhook", "DELIVERY_URL": "https://tickets.example/hook"}},
		{"secret not json", "DELIVERY_SECRET", map[string]string{"DELIVERY_KIND": "webhook", "DELIVERY_URL": "https://tickets.example/hook", "DELIVERY_SECRET": `s3cr3tvalue00000`}},
		{"wrong credentials for kind", "zendesk needs", map[string]string{"DELIVERY_KIND": "zendesk", "DELIVERY_URL": "https://acme.zendesk.com", "DELIVERY_SECRET": `{"secret":"s3cr3tvalue00000"}`}},
		{"bad secret kind", "webhook needs", map[string]string{"DELIVERY_KIND": "webhook", "DELIVERY_URL": "https://x.example/hook", "DELIVERY_SECRET": `{"email":"a","token":"s3cr3tvalue00000"}`}},
		{"unknown credential field", "DELIVERY_SECRET", map[string]string{"DELIVERY_KIND": "webhook", "DELIVERY_URL": "https://tickets.example/hook", "DELIVERY_SECRET": `{"secret":"x","pasword":"s3cr3tvalue00000"}`}},
		{"attempts zero", "DELIVERY_MAX_ATTEMPTS", map[string]string{"DELIVERY_KIND": "webhook", "DELIVERY_URL": "https://tickets.example/hook", "DELIVERY_SECRET": `{"secret":"s3cr3tvalue00000"}`, "DELIVERY_MAX_ATTEMPTS": "0"}},
		{"attempts too many", "DELIVERY_MAX_ATTEMPTS", map[string]string{"DELIVERY_KIND": "webhook", "DELIVERY_URL": "https://tickets.example/hook", "DELIVERY_SECRET": `{"secret":"s3cr3tvalue00000"}`, "DELIVERY_MAX_ATTEMPTS": "101"}},
		{"timeout too long", "timeout", map[string]string{"DELIVERY_KIND": "webhook", "DELIVERY_URL": "https://tickets.example/hook", "DELIVERY_SECRET": `{"secret":"s3cr3tvalue00000"}`, "DELIVERY_TIMEOUT": "1m"}},
		{"timeout not a duration", "DELIVERY_TIMEOUT", map[string]string{"DELIVERY_KIND": "webhook", "DELIVERY_URL": "https://tickets.example/hook", "DELIVERY_SECRET": `{"secret":"s3cr3tvalue00000"}`, "DELIVERY_TIMEOUT": "10"}},
		{"lookup not bool", "DELIVERY_LOOKUP", map[string]string{"DELIVERY_KIND": "webhook", "DELIVERY_URL": "https://tickets.example/hook", "DELIVERY_SECRET": `{"secret":"s3cr3tvalue00000"}`, "DELIVERY_LOOKUP": "yes please"}},
		{"sweep concurrency zero", "DELIVERY_SWEEP_CONCURRENCY", map[string]string{"DELIVERY_KIND": "webhook", "DELIVERY_URL": "https://tickets.example/hook", "DELIVERY_SECRET": `{"secret":"s3cr3tvalue00000"}`, "DELIVERY_SWEEP_CONCURRENCY": "0"}},
		{"sweep concurrency too many", "DELIVERY_SWEEP_CONCURRENCY", map[string]string{"DELIVERY_KIND": "webhook", "DELIVERY_URL": "https://tickets.example/hook", "DELIVERY_SECRET": `{"secret":"s3cr3tvalue00000"}`, "DELIVERY_SWEEP_CONCURRENCY": "257"}},
		{"sweep concurrency not a number", "DELIVERY_SWEEP_CONCURRENCY", map[string]string{"DELIVERY_KIND": "webhook", "DELIVERY_URL": "https://tickets.example/hook", "DELIVERY_SECRET": `{"secret":"s3cr3tvalue00000"}`, "DELIVERY_SWEEP_CONCURRENCY": "lots"}},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			if _, ok := c.vars["TABLE_NAME"]; !ok && c.field != "TABLE_NAME" {
				c.vars["TABLE_NAME"] = "t"
			}
			_, err := DeliveryFromEnv(denv(c.vars))
			if err == nil {
				t.Fatalf("err=nil, want an error naming %s", c.field)
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

// TestDeliveryLogsNoCredentials: printing or logging a Delivery of either
// kind, in any of the usual ways, shows neither the token nor the secret
// nor a token in the URL's query.
func TestDeliveryLogsNoCredentials(t *testing.T) {
	for _, d := range []Destination{
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

// TestCredentialsCoverEveryField: every string field of Destination is
// either a credential, whose value Credentials lists (so the composition
// root scrubs it from every error text), or named here as no credential.
// A field added later fails until it is classified.
func TestCredentialsCoverEveryField(t *testing.T) {
	notCredentials := map[string]bool{"Kind": true, "URL": true, "Email": true, "TeamID": true, "secretFrom": true}
	var d Destination
	v := reflect.ValueOf(&d).Elem()
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if f.Type.Kind() != reflect.String || notCredentials[f.Name] {
			continue
		}
		d = Destination{}
		marker := "marker-of-" + f.Name
		reflect.NewAt(f.Type, unsafe.Pointer(v.Field(i).UnsafeAddr())).Elem().SetString(marker)
		if !slices.Contains(d.Credentials(), marker) {
			t.Errorf("Destination.%s is neither listed by Credentials nor named as no credential", f.Name)
		}
	}
	d = Destination{Email: "agent@acme.com", Token: "tok-123", Secret: "whsec_c2VjcmV0", APIKey: " lin_api_K "}
	basic := base64.StdEncoding.EncodeToString([]byte("agent@acme.com/token:tok-123"))
	for _, want := range []string{"tok-123", "agent@acme.com/token:tok-123", basic, "Basic " + basic,
		"whsec_c2VjcmV0", "c2VjcmV0", " lin_api_K ", "lin_api_K"} {
		if !slices.Contains(d.Credentials(), want) {
			t.Errorf("Credentials() = %q; want %q among them", d.Credentials(), want)
		}
	}
}
