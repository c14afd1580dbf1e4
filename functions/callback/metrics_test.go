package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/google/uuid"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/internal/app/doors"
	"github.com/aivax-examples/idempotent-callback/internal/config"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/httpapi"
	"github.com/aivax-examples/idempotent-callback/internal/lambdart"
	"github.com/aivax-examples/idempotent-callback/internal/lambdaurl"
	"github.com/aivax-examples/idempotent-callback/internal/metrics"
	"github.com/aivax-examples/idempotent-callback/internal/store/dynamo"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/callbacktest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/emftest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
	"github.com/aivax-examples/idempotent-callback/internal/usercache"
)

// TestLambdaEMFCounts: the four calls through the deployed handler on
// DynamoDB Local, via the function URL adapter. Each call writes exactly
// one line; its EMF yields exactly the expected increments; the store
// call durations match the DynamoDB calls actually made, and the same
// calls with metrics off make exactly as many DynamoDB calls.
func TestLambdaEMFCounts(t *testing.T) {
	// secrets are what the calls carry that no metric may; the operation
	// key is added once known.
	secrets := slices.Clone(callbacktest.MetricsSecrets)
	endpoint := testenv.DynamoDB(t)
	table := tableWithUserA(t, endpoint)
	var calls, callsOff atomic.Int64
	cfg := config.Lambda{TableName: table, UserCacheTTL: time.Minute, UserCacheSize: 16, CallTimeout: 5 * time.Second,
		MetricsNamespace: "Test/Callback",
		Common:           config.Common{Policy: string(idem.PolicyArguments), Retention: time.Hour, MaxBodyBytes: 1 << 16, MinCost: 4, MaxCost: 12}}
	var buf bytes.Buffer
	logger := slog.New(lambdart.LogHandler(slog.NewJSONHandler(&buf, &slog.HandlerOptions{ReplaceAttr: lambdacontext.ReplaceAttr})))
	s, err := doors.CheckSettings(cfg.Common, callbacktest.MetricsHookKey, config.SettingEnvNames)
	if err != nil {
		t.Fatal(err)
	}
	h, err := handler(cfg, s, testenv.DynamoClient(t, endpoint, testenv.CountCallsButReadAhead(&calls)), logger, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The same handler without metrics, on its own client and table, with
	// the result cache the deployed handler has by default.
	cfgOff := cfg
	cfgOff.TableName = tableWithUserA(t, endpoint)
	storeOff := dynamo.New(testenv.DynamoClient(t, endpoint, testenv.CountCallsButReadAhead(&callsOff)), cfgOff.TableName, dynamo.Options{})
	auth, err := doors.Authenticator(s, false, discard())
	if err != nil {
		t.Fatal(err)
	}
	hOff := &httpapi.Handler{
		Service: &core.Service{Store: storeOff, Users: usercache.New(storeOff, cfg.UserCacheTTL, cfg.UserCacheSize),
			Policy: idem.PolicyArguments, Retention: cfg.Retention, NewID: uuid.NewString,
			Cache: doors.ResultCache(cfg.ResultCacheSize)},
		Auth: auth, MaxBody: cfg.MaxBodyBytes, Logger: discard(), PublicURL: cfg.PublicURL,
	}

	invoke := lambdaurl.Wrap(h)
	invokeOff := lambdaurl.Wrap(hOff)
	var nonces []string
	for i, c := range callbacktest.FourCalls(t) {
		ev := events.LambdaFunctionURLRequest{RawPath: "/callback", Body: c.Body,
			Headers:        map[string]string{"content-type": "application/json", "x-request-nonce": c.Nonce},
			RequestContext: events.LambdaFunctionURLRequestContext{HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: "POST"}}}
		nonces = append(nonces, c.Nonce)
		ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: fmt.Sprintf("req-%d", i)})
		ctx = context.WithValue(ctx, "x-amzn-trace-id", fmt.Sprintf("Root=1-67891233-abcdef01234567890123456%d;Parent=53995c3f42cd8ad8;Sampled=1", i)) //nolint:staticcheck // aws-lambda-go's own key
		if _, err := invoke(ctx, ev); err != nil {
			t.Fatal(err)
		}
		if _, err := invokeOff(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	if n := strings.Count(buf.String(), "\n"); n != 4 {
		t.Fatalf("%d lines for 4 calls, want exactly one each:\n%s", n, buf.String())
	}
	lines, lineData := emftest.Lines(t, buf.String())
	if len(lines) != 4 {
		t.Fatalf("%d of the 4 lines carry metrics, want all:\n%s", len(lines), buf.String())
	}
	var data []emftest.Datum
	for i, m := range lines {
		for _, x := range lineData[i] {
			if x.Namespace != "Test/Callback" {
				t.Errorf("namespace %q, want the configured Test/Callback", x.Namespace)
			}
		}
		data = append(data, lineData[i]...)
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
	// and outcome, by outcome and code, and by door with outcome (and
	// function).
	want := map[string]float64{
		"callbacks_total{door=aivax,outcome=created}":                             1,
		"callbacks_total{door=aivax,outcome=deduplicated}":                        1,
		"callbacks_total{door=aivax,outcome=rejected}":                            1,
		"callbacks_total{door=aivax,outcome=unauthenticated}":                     1,
		"callbacks_total{door=aivax,function=create_ticket,outcome=created}":      1,
		"callbacks_total{door=aivax,function=create_ticket,outcome=deduplicated}": 1,
		"callbacks_total{door=aivax,function=create_ticket,outcome=rejected}":     1,
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
	// create: the user read and the transaction; repeat: none (the user
	// and the completed operation are cached: the result cache is on by
	// default); rejection and 401: none. The claim's read-ahead GetItem
	// beside the transaction is not counted: it is part of the one store
	// call.
	if storeValues != 2 || calls.Load() != 2 {
		t.Errorf("store_call_duration_seconds has %d values and DynamoDB saw %d calls; want 2 and 2", storeValues, calls.Load())
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
