package config

import (
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
		"secret":"s3","lookup":true,"max_attempts":3,"timeout":"2s"}}`))
	if err != nil {
		t.Fatal(err)
	}
	want = Delivery{Kind: "webhook", URL: "http://127.0.0.1:9/hook?x=1", Secret: "s3", Lookup: true, MaxAttempts: 3, Timeout: 2 * time.Second}
	if c.Delivery == nil || *c.Delivery != want {
		t.Fatalf("delivery = %+v, want %+v", c.Delivery, want)
	}
	if c, err := ParseFile([]byte(`{"hook_key":"k"}`)); err != nil || c.Delivery != nil {
		t.Fatalf("no block: %+v, %v; want no delivery", c.Delivery, err)
	}
}

func TestDeliveryBlockRefused(t *testing.T) {
	const zd = `"kind":"zendesk","url":"https://acme.zendesk.com","email":"a@b.c","token":"tok-SECRET"`
	const wh = `"kind":"webhook","url":"https://hooks.example/in","secret":"sec-SECRET"`
	tests := []struct{ block, want string }{
		{`{"url":"https://x.example","secret":"s"}`, "delivery.kind"},
		{`{"kind":"jira","url":"https://x.example"}`, "delivery.kind"},
		{`{"kind":"zendesk","url":"https://acme.zendesk.com","email":"a@b.c"}`, "email and token"},
		{`{"kind":"zendesk","url":"https://acme.zendesk.com","token":"tok-SECRET"}`, "email and token"},
		{`{` + zd + `,"secret":"sec-SECRET"}`, "for kind webhook"},
		{`{"kind":"webhook","url":"https://hooks.example/in"}`, "needs secret"},
		{`{` + wh + `,"token":"tok-SECRET"}`, "for kind zendesk"},
		{`{"kind":"webhook","secret":"sec-SECRET"}`, "delivery.url"},
		{`{"kind":"webhook","url":"http://hooks.example/in","secret":"sec-SECRET"}`, "must be https"},
		{`{"kind":"webhook","url":"ftp://127.0.0.1/in","secret":"sec-SECRET"}`, "must be https"},
		{`{"kind":"webhook","url":"https://user:pw-SECRET@hooks.example/in","secret":"sec-SECRET"}`, "user info"},
		{`{"kind":"webhook","url":"/relative","secret":"sec-SECRET"}`, "delivery.url"},
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
		if err := (Delivery{Kind: "webhook", URL: u, Secret: "s"}).Validate(); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
}

func TestDeliveryNeverShowsCredentials(t *testing.T) {
	d := Delivery{Kind: "zendesk", URL: "https://acme.zendesk.com/?t=q-SECRET", Email: "a@b.c", Token: "tok-SECRET", Secret: "sec-SECRET"}
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

func TestDeliveryWithDefaults(t *testing.T) {
	d := Delivery{Kind: "webhook"}.WithDefaults()
	if d.MaxAttempts != DefaultDeliveryMaxAttempts || d.Timeout != DefaultDeliveryTimeout {
		t.Fatalf("%+v", d)
	}
	d = Delivery{MaxAttempts: 2, Timeout: time.Second}.WithDefaults()
	if d.MaxAttempts != 2 || d.Timeout != time.Second {
		t.Fatalf("%+v", d)
	}
}
