package otlptest

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// Fault is how a faulty collector answers an export.
type Fault int

const (
	// Hang reads the request and never answers (until the test ends).
	Hang Fault = iota
	// Refuse: nothing listens at the URL, every connection is refused.
	Refuse
	// Unavailable answers 503 to every export, with a Retry-After.
	Unavailable
	// Slow answers as a Receiver does, after a delay.
	Slow
)

func (f Fault) String() string {
	switch f {
	case Hang:
		return "hang"
	case Refuse:
		return "refused"
	case Unavailable:
		return "503"
	case Slow:
		return "slow"
	}
	return "unknown"
}

// Faulty is a collector with a fault, on loopback for one test. It counts
// the export requests it received, so a test can tell whether the
// exporter retried.
type Faulty struct {
	// URL is the endpoint to set as OTEL_EXPORTER_OTLP_ENDPOINT.
	URL string
	// Receiver keeps what a Slow collector accepted.
	*Receiver

	requests atomic.Int64
}

// Requests is how many export requests reached the collector.
func (f *Faulty) Requests() int64 { return f.requests.Load() }

// StartFaulty starts a collector with fault; delay is Slow's.
func StartFaulty(t testing.TB, fault Fault, delay time.Duration) *Faulty {
	t.Helper()
	f := &Faulty{Receiver: &Receiver{}}
	if fault == Refuse {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		f.URL = "http://" + ln.Addr().String()
		_ = ln.Close() // the port stays unbound for the test's short life
		return f
	}
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.requests.Add(1)
		switch fault {
		case Hang:
			select {
			case <-release:
			case <-r.Context().Done():
			}
		case Unavailable:
			w.Header().Set("Retry-After", "1")
			http.Error(w, "collector unavailable", http.StatusServiceUnavailable)
		case Slow:
			select {
			case <-time.After(delay):
				f.Receiver.ServeHTTP(w, r)
			case <-r.Context().Done():
			}
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // before srv.Close, which waits for the hung requests
	f.URL = srv.URL
	return f
}
