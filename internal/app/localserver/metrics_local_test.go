//go:build !nosqlite

package localserver

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/aivax-examples/idempotent-callback/internal/app/destination"
	"github.com/aivax-examples/idempotent-callback/internal/config"
	"github.com/aivax-examples/idempotent-callback/internal/httpapi"
	"github.com/aivax-examples/idempotent-callback/internal/metrics"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/callbacktest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/fakehelpdesk"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/jsonlines"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
)

// The four calls are callbacktest.FourCalls, as the callback
// function's metrics test sends them: both programs count them by the
// same labels.

// secrets are what the calls carry that no metric may.
var secrets = callbacktest.MetricsSecrets

// wantCallbacks is what the four calls count, by the label values every
// side emits (empty values are absent labels / dimensions).
var wantCallbacks = map[string]float64{
	"callbacks_total{door=aivax,function=create_ticket,outcome=created}":                         1,
	"callbacks_total{door=aivax,function=create_ticket,outcome=deduplicated}":                    1,
	"callbacks_total{code=invalid_arguments,door=aivax,function=create_ticket,outcome=rejected}": 1,
	"callbacks_total{door=aivax,outcome=unauthenticated}":                                        1,
}

// TestLocalPrometheusCounts: the four calls through the local server on
// SQLite; GET /metrics on the metrics_listen address shows exactly the
// expected increments, under the same names and labels as EMF.
func TestLocalPrometheusCounts(t *testing.T) {
	h, closer, _, metricsURL := localWithMetrics(t, localConfig(t, callbacktest.MetricsHookKey))
	srv := httptest.NewServer(h)
	defer srv.Close()
	var nonces []string
	for _, c := range callbacktest.FourCalls(t) {
		nonces = append(nonces, c.Nonce)
		callbacktest.Send(t, http.MethodPost, srv.URL+"/callback", c.Nonce, c.Body)
	}
	text, families := scrape(t, metricsURL)
	got := map[string]float64{}
	for _, m := range families[metrics.Callbacks].GetMetric() {
		got[seriesKey(metrics.Callbacks, m)] = m.GetCounter().GetValue()
	}
	if fmt.Sprint(got) != fmt.Sprint(wantCallbacks) {
		t.Errorf("callbacks_total:\n got %v\nwant %v", got, wantCallbacks)
	}
	if v := families[metrics.ColdStarts].GetMetric()[0].GetCounter().GetValue(); v != 1 {
		t.Errorf("cold_starts_total = %v, want 1", v)
	}
	// SQLite: one transaction for the create and one for the repeat;
	// users come from the file, not the store.
	if n := families[metrics.StoreCallDuration].GetMetric()[0].GetHistogram().GetSampleCount(); n != 2 {
		t.Errorf("store_call_duration_seconds count = %d, want 2", n)
	}
	var durations uint64
	for _, m := range families[metrics.CallbackDuration].GetMetric() {
		durations += m.GetHistogram().GetSampleCount()
	}
	if durations != 4 {
		t.Errorf("callback_duration_seconds count = %d, want 4", durations)
	}
	for _, s := range destination.MetricLabels().States {
		for _, k := range destination.MetricLabels().KindLabels() {
			if !strings.Contains(text, `deliveries_total{kind="`+k+`",state="`+s+`"} 0`) {
				t.Errorf("deliveries_total{kind=%q,state=%q} must show at zero before any delivery", k, s)
			}
		}
	}
	for _, s := range append(secrets, nonces[0]) {
		if strings.Contains(text, s) {
			t.Errorf("/metrics carries %q", s)
		}
	}
	if err := closer.Close(); err != nil {
		t.Fatal(err)
	}
	if resp, err := http.Get(metricsURL); err == nil {
		_ = resp.Body.Close()
		t.Errorf("/metrics still answers after Close")
	}
}

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
		{"Delivered", map[string]float64{"deliveries_total{kind=ticket,state=delivered}": 1}},
		{"Refused", map[string]float64{"deliveries_total{kind=ticket,state=delivered}": 1, "deliveries_total{kind=ticket,state=failed}": 1}},
		{"Come back in an hour", map[string]float64{"deliveries_total{kind=ticket,state=delivered}": 1, "deliveries_total{kind=ticket,state=failed}": 1,
			"deliveries_total{kind=ticket,state=retried}": 1}},
		{"Lost in the gateway", map[string]float64{"deliveries_total{kind=ticket,state=delivered}": 1, "deliveries_total{kind=ticket,state=failed}": 1,
			"deliveries_total{kind=ticket,state=retried}": 4, "deliveries_total{kind=ticket,state=unknown}": 1}},
	}
	for i, s := range steps {
		body := callbacktest.Create("user-a", fmt.Sprint("deliver-", i), callbacktest.Title(s.title))
		status, out := post(t, srv.URL, callbacktest.MetricsHookKey, body)
		if out["status"] != "created" {
			t.Fatalf("create %q: %d %v", s.title, status, out)
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
				allowed := map[string][]string{metrics.LabelState: destination.MetricLabels().States,
					metrics.LabelKind: destination.MetricLabels().KindLabels()}[l.GetName()]
				if !slices.Contains(allowed, l.GetValue()) {
					t.Errorf("%s has label %s=%q; only state and kind, from their closed sets, are allowed", f.GetName(), l.GetName(), l.GetValue())
				}
			}
		}
	}
	if !strings.Contains(text, "# HELP "+metrics.TicketsWaiting+" ") {
		t.Errorf("tickets_waiting has no help text")
	}
}

// TestLocalNoMetricsListener: without metrics_listen nothing listens and
// the handler records nothing.
func TestLocalNoMetricsListener(t *testing.T) {
	var logs bytes.Buffer
	h, closer, err := LocalServer(context.Background(), checked(t, localConfig(t, callbacktest.MetricsHookKey)), slog.New(slog.NewJSONHandler(&logs, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = closer.Close() }()
	if strings.Contains(logs.String(), "metrics listening") {
		t.Errorf("metrics listener started without metrics_listen: %s", logs.String())
	}
	// Nothing wraps the handler to collect store calls: it is the plain
	// handler, with no recorder.
	if hh, ok := h.(*httpapi.Handler); !ok || hh.Metrics != nil {
		t.Errorf("handler %T without metrics_listen, want *httpapi.Handler with no Metrics", h)
	}
}

func TestLocalMetricsListenBusy(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	cfg := localConfig(t, callbacktest.MetricsHookKey)
	cfg.MetricsListen = strings.TrimPrefix(srv.URL, "http://")
	if _, _, err := LocalServer(context.Background(), checked(t, cfg), discard(), nil); err == nil || !strings.Contains(err.Error(), "metrics_listen") {
		t.Fatalf("Local with a taken metrics_listen: %v, want an error naming metrics_listen", err)
	}
}

// localWithMetrics starts the local handler for cfg with a metrics
// listener on a free port, and returns it, its closer (closed at the end of
// the test), its logs and the /metrics URL its "metrics listening" line
// names.
func localWithMetrics(t *testing.T, cfg config.Local) (http.Handler, io.Closer, *testenv.Buffer, string) {
	t.Helper()
	cfg.MetricsListen = "127.0.0.1:0"
	logs := &testenv.Buffer{}
	h, closer, err := LocalServer(context.Background(), checked(t, cfg), slog.New(slog.NewJSONHandler(logs, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = closer.Close() })
	metricsURL := ""
	for _, m := range jsonlines.Decode(t, logs.String()) {
		if m["msg"] == "metrics listening" {
			metricsURL, _ = m["url"].(string)
		}
	}
	if metricsURL == "" {
		t.Fatalf("no metrics listening line in %s", logs.String())
	}
	return h, closer, logs, metricsURL
}

func scrape(t *testing.T, url string) (string, map[string]*dto.MetricFamily) {
	t.Helper()
	status, b := testenv.Get(t, url)
	if status != 200 {
		t.Fatalf("GET /metrics: %d %s", status, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("/metrics is not the text format: %v", err)
	}
	return string(b), fams
}

// seriesKey writes a series as emftest.Datum.Key does: sorted labels,
// empty ones left out (Prometheus treats an empty label as absent).
func seriesKey(name string, m *dto.Metric) string {
	var parts []string
	for _, l := range m.GetLabel() {
		if l.GetValue() != "" {
			parts = append(parts, l.GetName()+"="+l.GetValue())
		}
	}
	sort.Strings(parts)
	return name + "{" + strings.Join(parts, ",") + "}"
}
