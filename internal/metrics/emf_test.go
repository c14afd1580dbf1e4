package metrics_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/app/destination"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/httpapi"
	"github.com/aivax-examples/idempotent-callback/internal/metrics"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/emftest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/golden"
)

var t0 = time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)

func fixedNow() time.Time { return t0 }

// line renders attrs as the callback's line does: a JSON handler, here
// without the time so the output is stable.
func line(t *testing.T, msg string, attrs ...slog.Attr) []byte {
	t.Helper()
	var buf bytes.Buffer
	l := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(g []string, a slog.Attr) slog.Attr {
		if len(g) == 0 && a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
	l.LogAttrs(context.Background(), slog.LevelInfo, msg, attrs...) //nolint:sloglint // the golden lines are written under the message each test names
	return buf.Bytes()
}

func joinLines(lines [][]byte) []byte {
	return append(bytes.Join(lines, []byte("\n")), '\n')
}

func TestGoldenLines(t *testing.T) {
	rec := &metrics.EMF{Namespace: "AIVAX/Callback", Now: fixedNow, CallbackLabels: httpapi.MetricLabels(nil), DeliveryLabels: destination.MetricLabels()}
	many := func(n int, unit metrics.Unit) []metrics.Metric {
		ms := make([]metrics.Metric, n)
		for i := range ms {
			ms[i] = metrics.Metric{Name: fmt.Sprintf("m%03d", i), Unit: unit, Values: []float64{float64(i)}}
		}
		return ms
	}
	// A callback's event, with the members its log line carries itself.
	cb := func(c metrics.Callback, store []float64, cold bool) metrics.EMFEvent {
		e := rec.CallbackEvent(c, store, cold)
		for _, d := range []metrics.Dimension{{Name: "function", Value: c.Function}, {Name: "outcome", Value: c.Outcome}, {Name: "code", Value: c.Code}} {
			if d.Value != "" {
				e.Dimensions = append(e.Dimensions, d)
			}
		}
		return e
	}
	vals := make([]float64, 250)
	for i := range vals {
		vals[i] = float64(i) / 1000
	}
	cases := []struct {
		name string
		ev   metrics.EMFEvent
	}{
		{"created_cold.json", cb(metrics.Callback{Function: core.CreateTicket, Outcome: "created",
			Duration: 12500 * time.Microsecond}, []float64{0.004, 0.0065}, true)},
		{"rejected_code.json", cb(metrics.Callback{Function: core.CreateTicket, Outcome: "rejected",
			Code: core.CodeInvalidArguments, Duration: time.Millisecond}, nil, false)},
		{"unknown_function.json", cb(metrics.Callback{Function: "create_tikcet", Outcome: "rejected",
			Code: core.CodeUnknownFunction, Duration: time.Millisecond}, nil, false)},
		{"unauthenticated.json", cb(metrics.Callback{Outcome: "unauthenticated", Duration: 30 * time.Millisecond}, nil, false)},
		{"split_metrics.json", metrics.EMFEvent{Namespace: "AIVAX/Callback", Timestamp: t0, Directives: []metrics.Directive{
			{Dimensions: [][]string{{"state"}}, Metrics: many(150, metrics.Count)}},
			Dimensions: []metrics.Dimension{{Name: "state", Value: "delivered"}}}},
		{"split_values.json", metrics.EMFEvent{Namespace: "AIVAX/Callback", Timestamp: t0, Directives: []metrics.Directive{
			{Dimensions: [][]string{{}}, Metrics: []metrics.Metric{
				{Name: metrics.StoreCallDuration, Unit: metrics.Seconds, Values: vals},
				{Name: metrics.ColdStarts, Unit: metrics.Count, Values: []float64{1}}}}}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lines, err := metrics.EMFLines(c.ev)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range lines {
				if _, err := emftest.Parse(l); err != nil {
					t.Errorf("line is not valid EMF: %v\n%s", err, l)
				}
			}
			golden.Check(t, c.name, joinLines(lines))
		})
	}
}

// TestGoldenRecorderLines: what the recorder adds to the callback's and
// the delivery worker's own lines, as slog writes them.
func TestGoldenRecorderLines(t *testing.T) {
	rec := &metrics.EMF{Namespace: "AIVAX/Callback", Now: fixedNow, CallbackLabels: httpapi.MetricLabels(nil), DeliveryLabels: destination.MetricLabels()}
	ctx, req := metrics.WithRequest(context.Background())
	req.Add(4 * time.Millisecond)
	req.Add(6500 * time.Microsecond)
	var out [][]byte
	// The first callback is the cold start; the line carries function,
	// outcome and code itself, as internal/httpapi writes them.
	out = append(out, bytes.TrimSuffix(line(t, "callback",
		slog.String("function", core.CreateTicket), slog.String("outcome", "created"),
		rec.Callback(ctx, metrics.Callback{Function: core.CreateTicket, Outcome: "created", Duration: 12500 * time.Microsecond})), []byte("\n")))
	out = append(out, bytes.TrimSuffix(line(t, "callback",
		slog.String("function", ""), slog.String("outcome", "unauthenticated"),
		rec.Callback(context.Background(), metrics.Callback{Outcome: "unauthenticated", Duration: 30 * time.Millisecond})), []byte("\n")))
	out = append(out, bytes.TrimSuffix(line(t, "delivery",
		rec.Delivery(context.Background(), metrics.DeliveryStep{State: string(delivery.ResultDelivered), Lag: 2500 * time.Millisecond})), []byte("\n")))
	out = append(out, bytes.TrimSuffix(line(t, "delivery",
		rec.Delivery(context.Background(), metrics.DeliveryStep{State: string(delivery.ResultUnknown)})), []byte("\n")))
	out = append(out, bytes.TrimSuffix(line(t, "outbox",
		rec.TicketsWaiting(context.Background(), 7)), []byte("\n")))
	for _, l := range out {
		if _, err := emftest.Parse(l); err != nil {
			t.Errorf("line is not valid EMF: %v\n%s", err, l)
		}
	}
	golden.Check(t, "recorder_lines.json", joinLines(out))
}

func TestLimits(t *testing.T) {
	names := func(n int) []string {
		s := make([]string, n)
		for i := range s {
			s[i] = fmt.Sprintf("d%02d", i)
		}
		return s
	}
	dims := func(n int) []metrics.Dimension {
		ds := make([]metrics.Dimension, n)
		for i := range ds {
			ds[i] = metrics.Dimension{Name: fmt.Sprintf("d%02d", i), Value: "v"}
		}
		return ds
	}
	metricsN := func(n, values int) []metrics.Metric {
		ms := make([]metrics.Metric, n)
		for i := range ms {
			ms[i] = metrics.Metric{Name: fmt.Sprintf("m%03d", i), Unit: metrics.Count, Values: make([]float64, values)}
		}
		return ms
	}
	ev := func(set []string, ms []metrics.Metric) metrics.EMFEvent {
		return metrics.EMFEvent{Namespace: "N", Timestamp: t0, Dimensions: dims(len(set)),
			Directives: []metrics.Directive{{Dimensions: [][]string{set}, Metrics: ms}}}
	}
	parse := func(t *testing.T, lines [][]byte) (directives []int, values []int) {
		t.Helper()
		for _, l := range lines {
			var doc struct {
				AWS struct {
					CloudWatchMetrics []struct{ Metrics []json.RawMessage }
				} `json:"_aws"`
				M000 json.RawMessage `json:"m000"`
			}
			if err := json.Unmarshal(l, &doc); err != nil {
				t.Fatal(err)
			}
			if _, err := emftest.Parse(l); err != nil {
				t.Fatalf("invalid EMF: %v", err)
			}
			for _, d := range doc.AWS.CloudWatchMetrics {
				directives = append(directives, len(d.Metrics))
			}
			var vs []float64
			if json.Unmarshal(doc.M000, &vs) != nil {
				vs = []float64{0}
			}
			values = append(values, len(vs))
		}
		return directives, values
	}

	t.Run("30 dimensions per set", func(t *testing.T) {
		if _, err := metrics.EMFLines(ev(names(30), metricsN(1, 1))); err != nil {
			t.Fatalf("30 dimensions: %v", err)
		}
		_, err := metrics.EMFLines(ev(names(31), metricsN(1, 1)))
		if !errors.Is(err, metrics.ErrInvalidEMF) || !strings.Contains(err.Error(), "31 dimensions") {
			t.Fatalf("31 dimensions: %v, want a clear ErrInvalid", err)
		}
		if _, err := metrics.EMFAttr(ev(names(31), metricsN(1, 1))); !errors.Is(err, metrics.ErrInvalidEMF) {
			t.Fatalf("Attr, 31 dimensions: %v", err)
		}
	})
	t.Run("100 metrics per directive", func(t *testing.T) {
		for _, c := range []struct {
			n    int
			want []int
		}{{100, []int{100}}, {101, []int{100, 1}}, {250, []int{100, 100, 50}}} {
			lines, err := metrics.EMFLines(ev(names(1), metricsN(c.n, 1)))
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := parse(t, lines); fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("%d metrics: directives of %v metrics, want %v", c.n, got, c.want)
			}
		}
	})
	t.Run("100 values per metric", func(t *testing.T) {
		for _, c := range []struct {
			n    int
			want []int
		}{{1, []int{1}}, {100, []int{100}}, {101, []int{100, 1}}, {201, []int{100, 100, 1}}} {
			lines, err := metrics.EMFLines(ev(names(1), metricsN(1, c.n)))
			if err != nil {
				t.Fatal(err)
			}
			if _, got := parse(t, lines); fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("%d values: lines of %v values, want %v", c.n, got, c.want)
			}
		}
		if _, err := metrics.EMFAttr(ev(names(1), metricsN(1, 100))); err != nil {
			t.Errorf("Attr, 100 values: %v", err)
		}
		if _, err := metrics.EMFAttr(ev(names(1), metricsN(1, 101))); !errors.Is(err, metrics.ErrInvalidEMF) {
			t.Errorf("Attr, 101 values: %v, want ErrInvalidEMF (one line cannot hold them)", err)
		}
	})
	t.Run("refused", func(t *testing.T) {
		ok := ev(names(1), metricsN(1, 1))
		for name, mutate := range map[string]func(e *metrics.EMFEvent){
			"no namespace":         func(e *metrics.EMFEvent) { e.Namespace = "" },
			"AWS/ namespace":       func(e *metrics.EMFEvent) { e.Namespace = "AWS/Lambda" },
			"namespace character":  func(e *metrics.EMFEvent) { e.Namespace = "a\"b" },
			"long namespace":       func(e *metrics.EMFEvent) { e.Namespace = strings.Repeat("n", 256) },
			"NaN":                  func(e *metrics.EMFEvent) { e.Directives[0].Metrics[0].Values[0] = math.NaN() },
			"Inf":                  func(e *metrics.EMFEvent) { e.Directives[0].Metrics[0].Values[0] = math.Inf(1) },
			"no value":             func(e *metrics.EMFEvent) { e.Directives[0].Metrics[0].Values = nil },
			"no metric":            func(e *metrics.EMFEvent) { e.Directives[0].Metrics = nil },
			"no directive":         func(e *metrics.EMFEvent) { e.Directives = nil },
			"no dimension set":     func(e *metrics.EMFEvent) { e.Directives[0].Dimensions = nil },
			"empty value":          func(e *metrics.EMFEvent) { e.Dimensions[0].Value = "" },
			"metric is dimension":  func(e *metrics.EMFEvent) { e.Directives[0].Metrics[0].Name = "d00" },
			"metric named _aws":    func(e *metrics.EMFEvent) { e.Directives[0].Metrics[0].Name = "_aws" },
			"empty metric name":    func(e *metrics.EMFEvent) { e.Directives[0].Metrics[0].Name = "" },
			"empty dimension name": func(e *metrics.EMFEvent) { e.Directives[0].Dimensions[0][0] = "" },
		} {
			e := ok
			e.Dimensions = append([]metrics.Dimension(nil), ok.Dimensions...)
			e.Directives = []metrics.Directive{{Dimensions: [][]string{append([]string(nil), ok.Directives[0].Dimensions[0]...)},
				Metrics: []metrics.Metric{{Name: "m000", Values: []float64{1}}}}}
			mutate(&e)
			if _, err := metrics.EMFLines(e); !errors.Is(err, metrics.ErrInvalidEMF) {
				t.Errorf("%s: Lines err = %v, want ErrInvalidEMF", name, err)
			}
			if _, err := metrics.EMFAttr(e); !errors.Is(err, metrics.ErrInvalidEMF) {
				t.Errorf("%s: Attr err = %v, want ErrInvalidEMF", name, err)
			}
		}
	})
}

// TestCallbackFastPath holds the recorder's per-shape encoding to the
// generic encoder: for every shape, the same members.
func TestCallbackFastPath(t *testing.T) {
	rec := &metrics.EMF{Namespace: "AIVAX/Callback", Now: fixedNow, CallbackLabels: httpapi.MetricLabels(nil), DeliveryLabels: destination.MetricLabels()}
	gen := &metrics.EMF{Namespace: "AIVAX/Callback", Now: fixedNow, CallbackLabels: httpapi.MetricLabels(nil), DeliveryLabels: destination.MetricLabels()}
	calls := []metrics.Callback{
		{Function: core.CreateTicket, Outcome: "created"},
		{Function: core.GetTicket, Outcome: "rejected", Code: core.CodeTicketNotFound},
		{Function: "nope", Outcome: "rejected", Code: core.CodeUnknownFunction},
		{Outcome: "unauthenticated"},
		{Function: core.CreateTicket, Outcome: "no_such_outcome", Code: "no_such_code"},
		{Function: core.CreateTicket, Outcome: "rejected", Code: "no_such_code"},
	}
	for i, c := range calls {
		for _, store := range [][]time.Duration{nil, {time.Millisecond}, {time.Millisecond, 3 * time.Millisecond}} {
			for _, cold := range []bool{false, true} {
				c.Duration = time.Duration(i+1) * time.Millisecond
				ctx, req := metrics.WithRequest(context.Background())
				var secs []float64
				for _, d := range store {
					req.Add(d)
					secs = append(secs, d.Seconds())
				}
				rec.SetServed(!cold)
				fast := line(t, "callback", rec.Callback(ctx, c))
				want, err := metrics.EMFAttr(gen.CallbackEvent(c, secs, cold))
				if err != nil {
					t.Fatal(err)
				}
				if slow := line(t, "callback", want); !bytes.Equal(fast, slow) {
					t.Errorf("%+v store=%v cold=%v:\nfast:    %s\ngeneric: %s", c, store, cold, fast, slow)
				}
			}
		}
	}
}

// TestNoIdentifiersInMetrics is the property that no metric carries a
// tenant, user, key, title or nonce, whatever the caller sends: the values
// a caller controls (the function name) and anything else that reaches
// the recorder are drawn from those identifiers, and no metric name or
// dimension value CloudWatch would extract equals or contains one. The
// recorder's own members never repeat them either.
func TestNoIdentifiersInMetrics(t *testing.T) {
	secrets := []string{"tenant-a", "alice", "user-a", "3f1c9a0b7e2d4c6f8a1b3c5d7e9f0a2b4c6d8e0f1a3b5c7d9e1f2a4b6c8d0e2f",
		"Cannot sign in", "$2a$09$Ek2Vv7F3bXGqf8mW1yZJ0eO5q3Xb8zY2r9kT6hL4pN7sD1cV0uA3", "0b6f7d0e-2f0a-4c61-9d4e-4a1f3c0f4b8e"}
	pick := func(r *rand.Rand, set []string) string {
		switch r.IntN(3) {
		case 0:
			return secrets[r.IntN(len(secrets))]
		case 1:
			return ""
		}
		return set[r.IntN(len(set))]
	}
	functions := []string{core.CreateTicket, core.GetTicket}
	r := rand.New(rand.NewPCG(1, 2))
	rec := &metrics.EMF{Namespace: "AIVAX/Callback", Now: fixedNow, CallbackLabels: httpapi.MetricLabels(nil), DeliveryLabels: destination.MetricLabels()}
	for i := range 3000 {
		c := metrics.Callback{Function: pick(r, functions), Outcome: pick(r, httpapi.MetricLabels(nil).Outcomes),
			Code: pick(r, httpapi.MetricLabels(nil).Codes), Duration: time.Duration(r.IntN(1e9))}
		ctx, req := metrics.WithRequest(context.Background())
		req.Add(time.Duration(r.IntN(1e8)))
		attr := rec.Callback(ctx, c)
		own := line(t, "callback", attr)
		// The line as the handler writes it: the raw values beside the
		// metrics, which may name them as dimensions.
		full := line(t, "callback", slog.String("function", c.Function), slog.String("outcome", c.Outcome),
			slog.String("code", c.Code), slog.String("tenant", secrets[0]), attr)
		data, err := emftest.Parse(full)
		if err != nil {
			t.Fatalf("case %d %+v: %v\n%s", i, c, err, full)
		}
		if len(data) == 0 {
			t.Fatalf("case %d: no metric extracted from %s", i, full)
		}
		d := metrics.DeliveryStep{State: pick(r, destination.MetricLabels().States), Lag: time.Second}
		dl := line(t, "delivery", rec.Delivery(context.Background(), d))
		ddata, err := emftest.Parse(dl)
		if err != nil {
			t.Fatalf("delivery %+v: %v", d, err)
		}
		for _, s := range secrets {
			if bytes.Contains(own, []byte(s)) || bytes.Contains(dl, []byte(s)) {
				t.Fatalf("case %d: the recorder's members carry %q:\n%s\n%s", i, s, own, dl)
			}
			for _, dt := range append(data, ddata...) {
				if strings.Contains(dt.Key(), s) {
					t.Fatalf("case %d: metric %s carries %q", i, dt.Key(), s)
				}
			}
		}
	}
}

func TestCheckNamespace(t *testing.T) {
	if err := (&metrics.EMF{}).Check(); err != nil {
		t.Errorf("default namespace: %v", err)
	}
	if err := (&metrics.EMF{Namespace: "Team/Callbacks"}).Check(); err != nil {
		t.Errorf("Team/Callbacks: %v", err)
	}
	if err := (&metrics.EMF{Namespace: "AWS/Lambda"}).Check(); !errors.Is(err, metrics.ErrInvalidEMF) {
		t.Errorf("AWS/Lambda: %v, want ErrInvalidEMF", err)
	}
	bad := &metrics.EMF{Namespace: "bad\"namespace", Now: fixedNow, CallbackLabels: httpapi.MetricLabels(nil), DeliveryLabels: destination.MetricLabels()}
	if got := string(line(t, "callback", bad.Callback(context.Background(), metrics.Callback{Outcome: "created"}))); !strings.Contains(got, "metrics_error") {
		t.Errorf("a bad namespace must show in the line: %s", got)
	}
}

// TestCallbackAllocs: the recorder's part of a callback's line is three
// allocations (the _aws text, the attribute list and the raw value's box).
func TestCallbackAllocs(t *testing.T) {
	rec := &metrics.EMF{CallbackLabels: httpapi.MetricLabels(nil), DeliveryLabels: destination.MetricLabels()}
	ctx, req := metrics.WithRequest(context.Background())
	req.Add(time.Millisecond)
	c := metrics.Callback{Function: core.CreateTicket, Outcome: "created", Duration: time.Millisecond}
	if n := testing.AllocsPerRun(100, func() { _ = rec.Callback(ctx, c) }); n > 3 {
		t.Errorf("Callback: %v allocations, want at most 3", n)
	}
}

// BenchmarkCallbackLine: a callback's log line without metrics and with
// the recorder's members (what EMF adds to each request, the collector of
// store calls included).
func BenchmarkCallbackLine(b *testing.B) {
	rec := &metrics.EMF{CallbackLabels: httpapi.MetricLabels(nil), DeliveryLabels: destination.MetricLabels()}
	l := slog.New(slog.NewJSONHandler(io.Discard, nil))
	c := metrics.Callback{Function: core.CreateTicket, Outcome: "created", Duration: time.Millisecond}
	b.Run("without_metrics", func(b *testing.B) {
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			l.LogAttrs(ctx, slog.LevelInfo, "callback", slog.String("function", c.Function),
				slog.String("outcome", c.Outcome))
		}
	})
	b.Run("emf", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ctx, req := metrics.WithRequest(context.Background())
			req.Add(time.Millisecond)
			req.Add(2 * time.Millisecond)
			l.LogAttrs(ctx, slog.LevelInfo, "callback", slog.String("function", c.Function),
				slog.String("outcome", c.Outcome), rec.Callback(ctx, c))
		}
	})
}

// A failed read-ahead through metrics.ReadAheadReporter on the EMF
// recorder: every failure is one read_ahead_errors_total by class, the
// first line WARN with the error, the next a short INFO line; each line
// names its class once, and a class outside the set is "other".
func TestReadAheadErrorLines(t *testing.T) {
	rec := &metrics.EMF{Namespace: "AIVAX/Callback", Now: fixedNow}
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, nil))
	hook := metrics.ReadAheadReporter(func() metrics.Recorder { return rec }, logger, func(err error) string { return err.Error() })
	hook(context.Background(), errors.New("access_denied"))
	hook(context.Background(), errors.New("no such class"))
	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	if len(lines) != 2 {
		t.Fatalf("%d lines for two failures, want 2:\n%s", len(lines), buf.String())
	}
	for i, want := range []struct{ level, class string }{{"WARN", "access_denied"}, {"INFO", "other"}} {
		l := lines[i]
		if n := bytes.Count(l, []byte(`"class":`)); n != 1 {
			t.Errorf("line %d names its class %d times, want once: %s", i, n, l)
		}
		if !bytes.Contains(l, []byte(`"level":"`+want.level+`"`)) || bytes.Contains(l, []byte(`"error":`)) != (i == 0) {
			t.Errorf("line %d: want level %s, the error only on the first: %s", i, want.level, l)
		}
		data, err := emftest.Parse(l)
		if err != nil {
			t.Fatalf("line %d is not valid EMF: %v\n%s", i, err, l)
		}
		if len(data) != 1 || data[0].Name != metrics.ReadAheadErrors || data[0].Dimensions[metrics.LabelClass] != want.class ||
			len(data[0].Values) != 1 || data[0].Values[0] != 1 {
			t.Errorf("line %d: %+v, want one %s{class=%s} of 1", i, data, metrics.ReadAheadErrors, want.class)
		}
	}
}
