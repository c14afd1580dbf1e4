//go:build !nosqlite

package localserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/aivax-examples/idempotent-callback/internal/config"
	"github.com/aivax-examples/idempotent-callback/internal/metrics"
	"github.com/aivax-examples/idempotent-callback/internal/nonce"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/callbacktest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/fakehelpdesk"
)

// TestLocalPrometheusDeliveries: four tickets through the local server on
// SQLite with the fake helpdesk behind it: one delivered, one refused
// (failed), one told to come back in an hour (retried, then waiting) and
// one whose sends end in a bad gateway and whose lookups after the last
// send fail until they run out (retried after each send and after the
// first failed lookup, then unknown). GET /metrics shows exactly those counts, the
// lag of the delivered ticket, the one ticket still waiting, and no
// ticket id.
func TestLocalPrometheusDeliveries(t *testing.T) {
	fake := fakehelpdesk.New(t, fakehelpdesk.Config{})
	fc := fake.Config()
	// The n-th create and lookup the helpdesk receives, in the order the
	// tickets are made below.
	fake.Script(fakehelpdesk.Rule{Kind: fakehelpdesk.ZendeskCreate, N: 2, Fault: fakehelpdesk.Refuse(422)})
	fake.Script(fakehelpdesk.Rule{Kind: fakehelpdesk.ZendeskCreate, N: 3, Fault: fakehelpdesk.TooManyRequests("3600")})
	fake.Script(fakehelpdesk.Rule{Kind: fakehelpdesk.ZendeskCreate, N: 4, Fault: fakehelpdesk.Fault{Status: 502}})
	fake.Script(fakehelpdesk.Rule{Kind: fakehelpdesk.ZendeskCreate, N: 5, Fault: fakehelpdesk.Fault{Status: 502}})
	// The first lookup is the server's check at start.
	fake.Script(fakehelpdesk.Rule{Kind: fakehelpdesk.ZendeskLookup, N: 3, Fault: fakehelpdesk.Fault{Status: 500}})
	fake.Script(fakehelpdesk.Rule{Kind: fakehelpdesk.ZendeskLookup, N: 4, Fault: fakehelpdesk.Fault{Status: 500}})

	cfg := localConfig(t, callbacktest.MetricsHookKey)
	cfg.Delivery = &config.Destination{Kind: "zendesk", URL: fake.URL(), Email: fc.Email, Token: fc.Token,
		MaxAttempts: 2, Timeout: 2 * time.Second}
	h, _, logs, metricsURL := localWithMetrics(t, cfg)
	srv := httptest.NewServer(h)
	defer srv.Close()
	n, err := nonce.Generate(callbacktest.MetricsHookKey, 4)
	if err != nil {
		t.Fatal(err)
	}

	deliveries := func() map[string]float64 {
		_, fams := scrape(t, metricsURL)
		got := map[string]float64{}
		for _, m := range fams[metrics.Deliveries].GetMetric() {
			if v := m.GetCounter().GetValue(); v != 0 {
				got[seriesKey(metrics.Deliveries, m)] = v
			}
		}
		return got
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not after 30 s; deliveries %v\n%s", what, deliveries(), logs.String())
			}
		}
	}
	var ids []string
	steps := []struct {
		title string
		want  map[string]float64 // deliveries_total once the ticket is done with
	}{
		{"Delivered", map[string]float64{"deliveries_total{state=delivered}": 1}},
		{"Refused", map[string]float64{"deliveries_total{state=delivered}": 1, "deliveries_total{state=failed}": 1}},
		{"Come back in an hour", map[string]float64{"deliveries_total{state=delivered}": 1, "deliveries_total{state=failed}": 1,
			"deliveries_total{state=retried}": 1}},
		{"Lost in the gateway", map[string]float64{"deliveries_total{state=delivered}": 1, "deliveries_total{state=failed}": 1,
			"deliveries_total{state=retried}": 4, "deliveries_total{state=unknown}": 1}},
	}
	for i, s := range steps {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/callback",
			strings.NewReader(callbacktest.Create("user-a", fmt.Sprint("deliver-", i), callbacktest.Title(s.title))))
		req.Header.Set("X-Request-Nonce", n)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		var out map[string]any
		if err := json.Unmarshal(b, &out); err != nil || out["status"] != "created" {
			t.Fatalf("create %q: %d %s", s.title, resp.StatusCode, b)
		}
		ids = append(ids, out["ticket_id"].(string))
		waitFor(s.title, func() bool { return maps.Equal(deliveries(), s.want) })
	}
	waitFor("tickets_waiting 1", func() bool {
		_, fams := scrape(t, metricsURL)
		return fams[metrics.TicketsWaiting].GetMetric()[0].GetGauge().GetValue() == 1
	})

	text, fams := scrape(t, metricsURL)
	if got, want := deliveries(), steps[len(steps)-1].want; !maps.Equal(got, want) {
		t.Errorf("deliveries_total:\n got %v\nwant %v", got, want)
	}
	lag := fams[metrics.DeliveryLag].GetMetric()[0].GetHistogram()
	if lag.GetSampleCount() != 1 || lag.GetSampleSum() <= 0 || lag.GetSampleSum() > 30 {
		t.Errorf("delivery_lag_seconds: %d samples, sum %v; want one positive lag", lag.GetSampleCount(), lag.GetSampleSum())
	}
	if fake.Held(ids[0]) != 1 || fake.Total() != 1 {
		t.Errorf("helpdesk holds %d for the delivered ticket, %d in all; want 1 and 1", fake.Held(ids[0]), fake.Total())
	}
	for _, s := range append(append(ids, secrets...), fc.Token) {
		if strings.Contains(text, s) {
			t.Errorf("/metrics carries %q", s)
		}
	}
	for _, f := range []*dto.MetricFamily{fams[metrics.Deliveries], fams[metrics.DeliveryLag], fams[metrics.TicketsWaiting]} {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() != metrics.LabelState {
					t.Errorf("%s has label %s; only state is allowed", f.GetName(), l.GetName())
				}
			}
		}
	}
	if !bytes.Contains([]byte(text), []byte("# HELP "+metrics.TicketsWaiting+" ")) {
		t.Errorf("tickets_waiting has no help text")
	}
}
