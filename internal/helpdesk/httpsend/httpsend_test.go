package httpsend_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/helpdesk/httpsend"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/helpdesktest"
)

func mustURL(t testing.TB, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func post(t testing.TB, raw string) httpsend.Request {
	h := http.Header{}
	h.Set("Idempotency-Key", "key-1")
	h.Set("Content-Type", "application/json")
	return httpsend.Request{Method: http.MethodPost, URL: mustURL(t, raw), Header: h, Body: []byte(`{"a":1}`)}
}

// dropSecond answers the first request on a kept-alive connection and
// closes the connection of every later one without answering; it counts
// requests and connections.
type dropSecond struct {
	requests, conns atomic.Int32
	srv             *httptest.Server
}

func newDropSecond(t *testing.T) *dropSecond {
	d := &dropSecond{}
	d.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if d.requests.Add(1) == 1 {
			w.WriteHeader(http.StatusCreated)
			return
		}
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		conn.Close()
	}))
	d.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			d.conns.Add(1)
		}
	}
	d.srv.Start()
	t.Cleanup(d.srv.Close)
	return d
}

// TestStockTransportResends shows the hazard the client guards against:
// net/http's own client, sending a rewindable body with an Idempotency-Key,
// replays the request by itself when a reused connection closes unanswered.
// It makes sure the scenario of TestNeverResends really provokes a replay.
func TestStockTransportResends(t *testing.T) {
	d := newDropSecond(t)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	for i := range 2 {
		req, _ := http.NewRequest(http.MethodPost, d.srv.URL, bytes.NewReader([]byte(`{"a":1}`)))
		req.Header.Set("Idempotency-Key", "key-1")
		resp, err := c.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		if i == 0 && err != nil {
			t.Fatal(err)
		}
	}
	if got := d.requests.Load(); got != 3 {
		t.Fatalf("stock transport: server received %d requests; want 3 (the second one replayed)", got)
	}
}

// TestNeverResends: the same scenario through Client: the second request
// is lost after the server read it, and the client reports Unknown without
// sending it again.
func TestNeverResends(t *testing.T) {
	d := newDropSecond(t)
	c := httpsend.New(httpsend.Options{Timeout: 5 * time.Second})
	resp, err := c.Do(context.Background(), post(t, d.srv.URL))
	if err != nil || resp.Status != http.StatusCreated {
		t.Fatalf("first call: %v %v", resp, err)
	}
	_, err = c.Do(context.Background(), post(t, d.srv.URL))
	if se := helpdesktest.SendError(t, err); se.Failure != delivery.Unknown || se.Status != 0 {
		t.Fatalf("second call: %+v; want Unknown with no status", se)
	}
	if got := d.requests.Load(); got != 2 {
		t.Fatalf("server received %d requests; want 2 (no resend)", got)
	}
	if got := d.conns.Load(); got != 2 {
		t.Fatalf("server accepted %d connections for 2 calls; want one per call", got)
	}
}

func TestDialErrorIsNotCreated(t *testing.T) {
	_, err := httpsend.New(httpsend.Options{}).Do(context.Background(), post(t, "http://"+helpdesktest.ClosedAddr(t)+"/x"))
	if se := helpdesktest.SendError(t, err); se.Failure != delivery.NotCreated {
		t.Fatalf("got %v; want NotCreated", se)
	}
}

// TestTimeoutBeforeWriteIsNotCreated: the server accepts the connection but
// never reads, so a large body cannot be wholly written before the timeout.
func TestTimeoutBeforeWriteIsNotCreated(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range held {
			c.Close()
		}
		mu.Unlock()
	})
	req := post(t, "http://"+l.Addr().String()+"/x")
	req.Body = bytes.Repeat([]byte("x"), 64<<20)
	_, err = httpsend.New(httpsend.Options{Timeout: 300 * time.Millisecond}).Do(context.Background(), req)
	se := helpdesktest.SendError(t, err)
	if se.Failure != delivery.NotCreated || !strings.Contains(se.Error(), "timed out after 300ms") {
		t.Fatalf("got %v; want NotCreated after a timeout", se)
	}
}

// TestTimeoutAfterWriteIsUnknown: the server read the request and answers
// too late.
func TestTimeoutAfterWriteIsUnknown(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	_, err := httpsend.New(httpsend.Options{Timeout: 200 * time.Millisecond}).Do(context.Background(), post(t, srv.URL))
	if se := helpdesktest.SendError(t, err); se.Failure != delivery.Unknown || !strings.Contains(se.Error(), "timed out") {
		t.Fatalf("got %v; want Unknown after a timeout", se)
	}
}

// rawServer runs handle on every accepted connection.
func rawServer(t *testing.T, handle func(net.Conn)) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				handle(c)
			}()
		}
	}()
	return "http://" + l.Addr().String()
}

func readRequest(c net.Conn) {
	r, err := http.ReadRequest(bufio.NewReader(c))
	if err == nil {
		io.Copy(io.Discard, r.Body)
	}
}

func TestConnectionLostAfterWriteIsUnknown(t *testing.T) {
	base := rawServer(t, readRequest) // reads the request, then closes
	_, err := httpsend.New(httpsend.Options{}).Do(context.Background(), post(t, base))
	if se := helpdesktest.SendError(t, err); se.Failure != delivery.Unknown {
		t.Fatalf("got %v; want Unknown", se)
	}
}

// TestAnswerCutShortIsUnknown: a 201 whose body never arrives whole.
func TestAnswerCutShortIsUnknown(t *testing.T) {
	base := rawServer(t, func(c net.Conn) {
		readRequest(c)
		io.WriteString(c, "HTTP/1.1 201 Created\r\nContent-Length: 100\r\n\r\n{\"ticket\":")
	})
	_, err := httpsend.New(httpsend.Options{}).Do(context.Background(), post(t, base))
	if se := helpdesktest.SendError(t, err); se.Failure != delivery.Unknown || se.Status != http.StatusCreated {
		t.Fatalf("got %v; want Unknown with status 201", se)
	}
}

func TestRedirectIsNotFollowed(t *testing.T) {
	var other atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/a", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/b", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/b", func(w http.ResponseWriter, r *http.Request) { other.Add(1) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	req := post(t, srv.URL+"/a")
	resp, err := httpsend.New(httpsend.Options{}).Do(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if se := httpsend.Classify(req, resp); se == nil || se.Failure != delivery.Unknown || se.Status != 307 {
		t.Fatalf("307: %v; want Unknown", se)
	}
	if other.Load() != 0 {
		t.Fatal("the redirect was followed: the body was sent twice")
	}
}

func TestRequestAsSent(t *testing.T) {
	var got *http.Request
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, body = r, must(io.ReadAll(r.Body))
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"error":"slow down"}`)
	}))
	t.Cleanup(srv.Close)
	req := post(t, srv.URL+"/p?q=1")
	resp, err := httpsend.New(httpsend.Options{}).Do(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if got.Method != http.MethodPost || got.URL.Path != "/p" || got.URL.RawQuery != "q=1" ||
		got.Header.Get("Idempotency-Key") != "key-1" || got.ContentLength != 7 ||
		string(body) != `{"a":1}` || got.Proto != "HTTP/1.1" || !got.Close {
		t.Fatalf("request as received: %s %s %v len=%d body=%q proto=%s close=%v",
			got.Method, got.URL, got.Header, got.ContentLength, body, got.Proto, got.Close)
	}
	if resp.Status != 429 || resp.RetryAfter != 7*time.Second || string(resp.Body) != `{"error":"slow down"}` {
		t.Fatalf("response %+v", resp)
	}
	se := httpsend.Classify(req, resp)
	if se.Failure != delivery.NotCreated || se.RetryAfter != 7*time.Second ||
		!strings.Contains(se.Error(), "slow down") {
		t.Fatalf("classified %v", se)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestClassify(t *testing.T) {
	cases := []struct {
		status int
		want   delivery.Failure // 0: no error
	}{
		{200, 0}, {201, 0}, {202, 0}, {204, 0},
		{301, delivery.Unknown}, {303, delivery.Unknown}, {308, delivery.Unknown},
		{400, delivery.Refused}, {401, delivery.Misconfigured}, {403, delivery.Misconfigured},
		{404, delivery.Misconfigured}, {410, delivery.Refused}, {413, delivery.Refused}, {422, delivery.Refused},
		{408, delivery.NotCreated}, {429, delivery.NotCreated},
		{409, delivery.Unknown},
		{500, delivery.Unknown}, {502, delivery.Unknown}, {503, delivery.Unknown}, {504, delivery.Unknown},
	}
	req := post(t, "https://h.example/x")
	for _, c := range cases {
		resp := &httpsend.Response{Status: c.status, RetryAfter: 3 * time.Second}
		se := httpsend.Classify(req, resp)
		if c.want == 0 {
			if se != nil {
				t.Errorf("%d: %v; want success", c.status, se)
			}
			continue
		}
		if se == nil || se.Failure != c.want || se.Status != c.status || se.RetryAfter != 3*time.Second {
			t.Errorf("%d: %+v; want %s", c.status, se, c.want)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	cases := []struct {
		v    string
		want time.Duration
	}{
		{"", 0},
		{"0", 0},
		{"120", 120 * time.Second},
		{" 5 ", 5 * time.Second},
		{"Tue, 01 Dec 2026 03:01:30 GMT", 90 * time.Second},
		{"Tuesday, 01-Dec-26 03:00:10 GMT", 10 * time.Second}, // RFC 850
		{"Tue Dec  1 03:00:20 2026", 20 * time.Second},        // asctime
		{"Tue, 01 Dec 2026 02:59:00 GMT", 0},                  // past
		{"-5", 0},
		{"1.5", 0},
		{"soon", 0},
		{"99999999999999999999", 1<<63 - 1},
	}
	for _, c := range cases {
		h := http.Header{}
		if c.v != "" {
			h.Set("Retry-After", c.v)
		}
		if got := httpsend.RetryAfter(h, now); got != c.want {
			t.Errorf("Retry-After %q: %v; want %v", c.v, got, c.want)
		}
	}
}

func TestCheckURL(t *testing.T) {
	ok := []string{
		"https://acme.zendesk.com", "https://hooks.example/x?team=a",
		"http://localhost:8080/hook", "http://127.0.0.1:9/x", "http://127.9.9.9", "http://[::1]:80/",
		"HTTP://LOCALHOST/x",
	}
	for _, raw := range ok {
		if _, err := httpsend.CheckURL(raw); err != nil {
			t.Errorf("%s: %v", raw, err)
		}
	}
	bad := map[string]string{
		"http://acme.zendesk.com":            "must be https",
		"http://10.0.0.1/x":                  "must be https",
		"http://localhost.example.com/x":     "must be https",
		"ftp://localhost/x":                  "must be https",
		"https://user:hunter2@acme.com":      "user info",
		"https:///x":                         "no host",
		"acme.zendesk.com":                   "no host",
		"https://acme.com/x#frag":            "fragment",
		"https://acme.com/%zz":               "not a URL",
		"":                                   "no host",
		"https://acme.com:99999999999999999": "bad port",
		"https://acme.com:0/x":               "bad port",
	}
	for raw, want := range bad {
		_, err := httpsend.CheckURL(raw)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v; want an error saying %q", raw, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%q: error %q shows the password", raw, err)
		}
	}
}

// TestCheckBaseURL: a base URL passes CheckURL's rules and has no query,
// not even an empty one; each refusal is a SettingError of "url".
func TestCheckBaseURL(t *testing.T) {
	if u, err := httpsend.CheckBaseURL("https://acme.zendesk.com/"); err != nil || u.Host != "acme.zendesk.com" {
		t.Errorf("a base URL: %v, %v", u, err)
	}
	for raw, want := range map[string]string{
		"https://acme.com?token=hunter2": "must not have a query",
		"https://acme.com/?":             "must not have a query",
		"http://acme.com":                "must be https",
	} {
		_, err := httpsend.CheckBaseURL(raw)
		var se *httpsend.SettingError
		if !errors.As(err, &se) || se.Field != "url" || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%q: %v; want a url SettingError saying %q, without the query", raw, err, want)
		}
	}
}

// TestCheckLookupID: an empty id is refused, naming the adapter; any
// other passes.
func TestCheckLookupID(t *testing.T) {
	if err := httpsend.CheckLookupID("zendesk", ""); err == nil || err.Error() != "zendesk: lookup without an id" {
		t.Errorf("empty id: %v", err)
	}
	if err := httpsend.CheckLookupID("zendesk", "t-1"); err != nil {
		t.Errorf("an id: %v", err)
	}
}

// TestNewChecked: a negative timeout is refused, naming it; zero takes
// the default.
func TestNewChecked(t *testing.T) {
	if _, err := httpsend.NewChecked(httpsend.Options{Timeout: -time.Second}); err == nil || err.Error() != "timeout -1s is negative" {
		t.Errorf("negative timeout: %v", err)
	}
	if c, err := httpsend.NewChecked(httpsend.Options{}); err != nil || c == nil {
		t.Errorf("zero timeout: %v, %v", c, err)
	}
}

// TestSettingsShown: the printed form is kind{url=... settings...
// timeout=...} and the logged one the same group led by kind; the URL
// (path and query) and a credential show only redacted, an unset
// credential as "".
func TestSettingsShown(t *testing.T) {
	s := httpsend.Settings{Kind: "hook", URL: "https://hooks.example/x?token=hunter2", Timeout: 2 * time.Second,
		Attrs: []slog.Attr{httpsend.Secret("secret", "whsec_hunter2"), slog.Bool("lookup", true), httpsend.Secret("unset", "")}}
	const want = "hook{url=https://hooks.example/* secret=[redacted] lookup=true unset= timeout=2s}"
	if got := s.String(); got != want {
		t.Errorf("String:\n got %s\nwant %s", got, want)
	}
	var out bytes.Buffer
	slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}})).Info("d", "cfg", s)
	const wantLog = "level=INFO msg=d cfg.kind=hook cfg.url=https://hooks.example/* cfg.secret=[redacted] cfg.lookup=true cfg.unset=\"\" cfg.timeout=2s\n"
	if out.String() != wantLog {
		t.Errorf("logged:\n got %s\nwant %s", out.String(), wantLog)
	}
}

// TestErrorsHideQuery: a URL's query may carry a token; no error text
// shows it, whether the failure is a dial error or a status.
func TestErrorsHideQuery(t *testing.T) {
	const secret = "s3cr3t-token-value"
	req := post(t, "http://"+helpdesktest.ClosedAddr(t)+"/x?token="+secret)
	req.Header.Set("Authorization", "Basic "+secret)
	_, err := httpsend.New(httpsend.Options{}).Do(context.Background(), req)
	if err == nil || strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "/*") {
		t.Fatalf("dial error %q", err)
	}
	srv := helpdesktest.Answering(t, http.StatusInternalServerError, "")
	req.URL = mustURL(t, srv.URL+"/x?token="+secret)
	resp, err := httpsend.New(httpsend.Options{}).Do(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if se := httpsend.Classify(req, resp); strings.Contains(se.Error(), secret) {
		t.Fatalf("status error %q", se)
	}
}

func TestExcerpt(t *testing.T) {
	if got := httpsend.Excerpt(nil); got != "" {
		t.Fatalf("empty: %q", got)
	}
	if got := httpsend.Excerpt([]byte(" {\"error\":\n \"x\"} ")); got != `: {"error": "x"}` {
		t.Fatalf("got %q", got)
	}
	long := httpsend.Excerpt([]byte(strings.Repeat("é", 300)))
	if len(long) > 210 || !strings.HasSuffix(long, "...") || strings.ContainsRune(long, '\uFFFD') {
		t.Fatalf("long: %d bytes %q", len(long), long)
	}
}

// TestSlackURLNeverInErrors: a URL with a secret in its path and query
// (a Slack-style webhook), or in its first path segment (Make style), is
// never quoted by an error of Do or Classify, not even its first segment:
// connection refused, timeout, 5xx, and an answer that quotes the URL back.
func TestSlackURLNeverInErrors(t *testing.T) {
	const path, query = "/services/T000/B000/XXXXSECRET", "token=abc-secret"
	const makeToken = "mk7q2pXsecretTokenOfTheScenario"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // so that the server notices the client leaving
		if r.URL.Query().Get("slow") != "" {
			<-r.Context().Done()
			return
		}
		w.WriteHeader(502)
		io.WriteString(w, "bad gateway for "+r.URL.String()+" and https://"+r.Host+r.URL.RequestURI())
	}))
	t.Cleanup(srv.Close)
	c := httpsend.New(httpsend.Options{Timeout: 200 * time.Millisecond})
	var out strings.Builder
	for _, raw := range []string{
		srv.URL + path + "?" + query,
		srv.URL + path + "?" + query + "&slow=1",
		"http://" + helpdesktest.ClosedAddr(t) + path + "?" + query,
		srv.URL + "/" + makeToken, // Make style: the first segment is the secret
	} {
		req := post(t, raw)
		resp, err := c.Do(context.Background(), req)
		if err != nil {
			out.WriteString(err.Error() + "\n")
			continue
		}
		out.WriteString(httpsend.Classify(req, resp).Error() + "\n")
	}
	text := out.String()
	for _, secret := range []string{"T000", "B000", "XXXXSECRET", "abc-secret", makeToken, "services"} {
		if strings.Contains(text, secret) {
			t.Fatalf("%q leaked:\n%s", secret, text)
		}
	}
	if strings.Count(text, "/*") < 4 || !strings.Contains(text, "answered 502") ||
		!strings.Contains(text, "timed out") || !strings.Contains(text, "refused") {
		t.Fatalf("not the errors the test means to check:\n%s", text)
	}
}

// TestEchoedHeaderCredentialsScrubbed: an answer quoting the request's
// credential headers (a Basic pair, its password, a bearer token, an API
// key) reaches no error text of the client's, whoever builds the
// request: Classify's and LookupError's quote of the body is scrubbed, as
// the client's own errors are of Options.Secrets.
func TestEchoedHeaderCredentialsScrubbed(t *testing.T) {
	const pair, bearer, apiKey = "agent@example.com/token:zd-TOKEN-123", "oauth-TOKEN-456", "lin_api_KEY789"
	basic := base64.StdEncoding.EncodeToString([]byte(pair))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := r.Header.Get("Authorization")
		decoded, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(a, "Basic "))
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(w, `{"error":"echo %s %s %s", "seen":%q}`, a, r.Header.Get("X-Api-Key"), decoded, r.Header.Values("Authorization"))
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	for auth, carried := range map[string][]string{
		"Basic " + basic:   {basic, pair, "zd-TOKEN-123", apiKey},
		"Bearer " + bearer: {bearer, apiKey},
		apiKey:             {apiKey},
	} {
		c := httpsend.New(httpsend.Options{})
		req := httpsend.Request{Method: http.MethodPost, URL: u, Header: http.Header{"Authorization": {auth}, "X-Api-Key": {apiKey}}, Body: []byte(`{}`)}
		resp, err := c.Do(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range []error{httpsend.Classify(req, resp), httpsend.LookupError(req, resp)} {
			text := e.Error()
			for _, cred := range carried {
				if strings.Contains(text, cred) {
					t.Errorf("%s: %q carries %q", auth, text, cred)
				}
			}
			if !strings.Contains(text, "echo") {
				t.Errorf("%s: %q does not quote the answer", auth, text)
			}
		}
	}
}
