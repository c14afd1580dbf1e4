package app

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/aivax-examples/idempotent-callback/internal/config"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/httpapi"
	"github.com/aivax-examples/idempotent-callback/internal/lambdaurl"
	"github.com/aivax-examples/idempotent-callback/internal/metrics"
	"github.com/aivax-examples/idempotent-callback/internal/metrics/emf/emftest"
	"github.com/aivax-examples/idempotent-callback/internal/nonce"
	"github.com/aivax-examples/idempotent-callback/internal/opkey"
	"github.com/aivax-examples/idempotent-callback/internal/store/dynamo"
	"github.com/aivax-examples/idempotent-callback/internal/testenv"
	"github.com/aivax-examples/idempotent-callback/internal/usercache"
)

const metricsHookKey = "metrics-test-hook-key"

// fourCalls are one create, its repeat, one rejection and one 401, with
// what each must count.
func fourCalls(t *testing.T) []struct {
	name, nonce, body string
} {
	t.Helper()
	n, err := nonce.Generate(metricsHookKey, 4)
	if err != nil {
		t.Fatal(err)
	}
	create := callbackBody("user-a", "metrics-r-1")
	bad := `{"type":"tool_call","function":{"name":"create_ticket","content":{"title":""}},` +
		`"context":{"externalUserId":"user-a","metadata":{"request_id":"metrics-r-2"}}}`
	return []struct{ name, nonce, body string }{
		{"create", n, create}, {"repeat", n, create}, {"rejection", n, bad}, {"401", "", create},
	}
}

// secrets are what the calls carry that no metric may: tenant, user,
// external user, title and, once known, the operation key and the nonce.
var secrets = []string{"tenant-a", "alice", "user-a", "Cannot sign in"}

// wantCallbacks is what the four calls count, by the label values every
// side emits (empty values are absent labels / dimensions).
var wantCallbacks = map[string]float64{
	"callbacks_total{function=create_ticket,outcome=created}":                         1,
	"callbacks_total{function=create_ticket,outcome=deduplicated}":                    1,
	"callbacks_total{code=invalid_arguments,function=create_ticket,outcome=rejected}": 1,
	"callbacks_total{outcome=unauthenticated}":                                        1,
}

func TestMain(m *testing.M) { testenv.Main(m) }

// TestLambdaEMFCounts: the four calls through the deployed handler on
// DynamoDB Local, via the function URL adapter. Each call writes exactly
// one line; its EMF yields exactly the expected increments; the store
// call durations match the DynamoDB calls actually made, and the same
// calls with metrics off make exactly as many DynamoDB calls.
func TestLambdaEMFCounts(t *testing.T) {
	endpoint := testenv.DynamoDB(t)
	table := testenv.CreateTable(t, endpoint)
	var calls, callsOff atomic.Int64
	seed := dynamo.New(testenv.DynamoClient(t, endpoint), table, dynamo.Options{})
	if err := seed.PutUser(context.Background(), core.User{ExternalID: "user-a", TenantID: "tenant-a", UserID: "alice"}); err != nil {
		t.Fatal(err)
	}
	cfg := config.Lambda{TableName: table, UserCacheTTL: time.Minute, UserCacheSize: 16, CallTimeout: 5 * time.Second,
		MetricsNamespace: "Test/Callback",
		Common:           config.Common{Policy: opkey.PolicyArguments, Retention: time.Hour, MaxBodyBytes: 1 << 16, MinCost: 4, MaxCost: 12}}
	var buf bytes.Buffer
	logger := slog.New(invocationHandler{slog.NewJSONHandler(&buf, &slog.HandlerOptions{ReplaceAttr: lambdacontext.ReplaceAttr})})
	h, err := lambdaHandler(cfg, testenv.DynamoClient(t, endpoint, testenv.CountCalls(&calls)), metricsHookKey, logger)
	if err != nil {
		t.Fatal(err)
	}
	// The same handler without metrics, on its own client and table.
	cfgOff := cfg
	cfgOff.TableName = testenv.CreateTable(t, endpoint)
	seedOff := dynamo.New(testenv.DynamoClient(t, endpoint), cfgOff.TableName, dynamo.Options{})
	if err := seedOff.PutUser(context.Background(), core.User{ExternalID: "user-a", TenantID: "tenant-a", UserID: "alice"}); err != nil {
		t.Fatal(err)
	}
	storeOff := dynamo.New(testenv.DynamoClient(t, endpoint, testenv.CountCalls(&callsOff)), cfgOff.TableName, dynamo.Options{})
	auth, err := authenticator(metricsHookKey, false, cfg.Common, discard())
	if err != nil {
		t.Fatal(err)
	}
	hOff := handler(cfgOff.Common, storeOff, usercache.New(storeOff, cfg.UserCacheTTL, cfg.UserCacheSize), auth, discard())

	invoke := lambdaurl.Wrap(h)
	invokeOff := lambdaurl.Wrap(hOff)
	var nonces []string
	for i, c := range fourCalls(t) {
		ev := events.LambdaFunctionURLRequest{RawPath: "/callback", Body: c.body,
			Headers:        map[string]string{"content-type": "application/json", "x-request-nonce": c.nonce},
			RequestContext: events.LambdaFunctionURLRequestContext{HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: "POST"}}}
		nonces = append(nonces, c.nonce)
		ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: fmt.Sprintf("req-%d", i)})
		ctx = context.WithValue(ctx, "x-amzn-trace-id", fmt.Sprintf("Root=1-67891233-abcdef01234567890123456%d;Parent=53995c3f42cd8ad8;Sampled=1", i)) //nolint:staticcheck // aws-lambda-go's own key
		if _, err := invoke(ctx, ev); err != nil {
			t.Fatal(err)
		}
		if _, err := invokeOff(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	if len(lines) != 4 {
		t.Fatalf("%d lines for 4 calls, want exactly one each:\n%s", len(lines), buf.String())
	}
	var data []emftest.Datum
	for i, l := range lines {
		d, err := emftest.Parse(l)
		if err != nil || len(d) == 0 {
			t.Fatalf("line %d is not EMF (%v): %s", i, err, l)
		}
		for _, x := range d {
			if x.Namespace != "Test/Callback" {
				t.Errorf("namespace %q, want the configured Test/Callback", x.Namespace)
			}
		}
		data = append(data, d...)
		var m map[string]any
		_ = json.Unmarshal(l, &m)
		if m["requestId"] != fmt.Sprintf("req-%d", i) || m["xrayTraceId"] != fmt.Sprintf("1-67891233-abcdef01234567890123456%d", i) {
			t.Errorf("line %d: requestId %v, xrayTraceId %v; want the invocation's", i, m["requestId"], m["xrayTraceId"])
		}
		if key, _ := m["operation_key"].(string); key != "" {
			secrets = append(secrets, key)
		}
	}
	sums := emftest.Sum(data)
	got := map[string]float64{}
	for k, v := range sums {
		if strings.HasPrefix(k, metrics.Callbacks+"{") {
			got[k] = v
		}
	}
	// The Prometheus series' rollups: in total, by outcome, by function
	// and outcome, by outcome and code.
	want := map[string]float64{
		"callbacks_total{}":                                            4,
		"callbacks_total{outcome=created}":                             1,
		"callbacks_total{outcome=deduplicated}":                        1,
		"callbacks_total{outcome=rejected}":                            1,
		"callbacks_total{outcome=unauthenticated}":                     1,
		"callbacks_total{function=create_ticket,outcome=created}":      1,
		"callbacks_total{function=create_ticket,outcome=deduplicated}": 1,
		"callbacks_total{function=create_ticket,outcome=rejected}":     1,
		"callbacks_total{code=invalid_arguments,outcome=rejected}":     1,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("callbacks_total:\n got %v\nwant %v", got, want)
	}
	if sums["cold_starts_total{}"] != 1 {
		t.Errorf("cold_starts_total = %v, want 1", sums["cold_starts_total{}"])
	}
	storeValues := 0
	for _, d := range data {
		if d.Name == metrics.StoreCallDuration {
			storeValues += len(d.Values)
		}
	}
	// create: the user read and the transaction; repeat: the transaction
	// (the user is cached); rejection and 401: none.
	if storeValues != 3 || calls.Load() != 3 {
		t.Errorf("store_call_duration_seconds has %d values and DynamoDB saw %d calls; want 3 and 3", storeValues, calls.Load())
	}
	if callsOff.Load() != calls.Load() {
		t.Errorf("DynamoDB calls with metrics %d, without %d: EMF must add none", calls.Load(), callsOff.Load())
	}
	for _, d := range data {
		for _, s := range append(secrets, nonces[0]) {
			if strings.Contains(d.Key(), s) {
				t.Errorf("metric %s carries %q", d.Key(), s)
			}
		}
	}
}

// TestLocalPrometheusCounts: the four calls through the local server on
// SQLite; GET /metrics on the metrics_listen address shows exactly the
// expected increments, under the same names and labels as EMF.
func TestLocalPrometheusCounts(t *testing.T) {
	if !SQLiteIncluded || !PrometheusIncluded {
		t.Skip("built without SQLite or Prometheus")
	}
	cfg := localConfig(t, metricsHookKey)
	cfg.MetricsListen = "127.0.0.1:0"
	var logs bytes.Buffer
	h, closer, err := Local(context.Background(), cfg, slog.New(slog.NewJSONHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = closer.Close() }()
	metricsURL := ""
	for sc := bufio.NewScanner(bytes.NewReader(logs.Bytes())); sc.Scan(); {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil && m["msg"] == "metrics listening" {
			metricsURL, _ = m["url"].(string)
		}
	}
	if metricsURL == "" {
		t.Fatalf("no metrics listening line in %s", logs.String())
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	var nonces []string
	for _, c := range fourCalls(t) {
		nonces = append(nonces, c.nonce)
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/callback", strings.NewReader(c.body))
		if c.nonce != "" {
			req.Header.Set("X-Request-Nonce", c.nonce)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
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
	for _, s := range metrics.DeliveryStates {
		if !strings.Contains(text, `deliveries_total{state="`+s+`"} 0`) {
			t.Errorf("deliveries_total{state=%q} must show at zero before any delivery", s)
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

// TestLocalNoMetricsListener: without metrics_listen nothing listens and
// the handler records nothing.
func TestLocalNoMetricsListener(t *testing.T) {
	if !SQLiteIncluded {
		t.Skip("built with -tags nosqlite")
	}
	var logs bytes.Buffer
	h, closer, err := Local(context.Background(), localConfig(t, metricsHookKey), slog.New(slog.NewJSONHandler(&logs, nil)))
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
	if !SQLiteIncluded || !PrometheusIncluded {
		t.Skip("built without SQLite or Prometheus")
	}
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	cfg := localConfig(t, metricsHookKey)
	cfg.MetricsListen = strings.TrimPrefix(srv.URL, "http://")
	if _, _, err := Local(context.Background(), cfg, discard()); err == nil || !strings.Contains(err.Error(), "metrics_listen") {
		t.Fatalf("Local with a taken metrics_listen: %v, want an error naming metrics_listen", err)
	}
}

func scrape(t *testing.T, url string) (string, map[string]*dto.MetricFamily) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: %d %s", resp.StatusCode, b)
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
