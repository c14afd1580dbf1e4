package fakehelpdesk_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/testkit/fakehelpdesk"
)

// client talks to the fake with plain net/http, one connection per call,
// so that the fake is tested independently of the adapters.
type client struct {
	t  *testing.T
	s  *fakehelpdesk.Server
	hc *http.Client
	n  atomic.Int64 // requests signed, for distinct timestamps
}

func newClient(t *testing.T, s *fakehelpdesk.Server, timeout time.Duration) *client {
	tr := &http.Transport{DisableKeepAlives: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &client{t: t, s: s, hc: &http.Client{Transport: tr, Timeout: timeout}}
}

type reply struct {
	status int
	header http.Header
	body   string
	err    error
}

func (c *client) do(req *http.Request) reply {
	c.t.Helper()
	resp, err := c.hc.Do(req)
	if err != nil {
		return reply{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: string(b), err: err}
}

func (c *client) zendeskCreate(key, body string) reply {
	req, _ := http.NewRequest(http.MethodPost, c.s.URL()+"/api/v2/tickets", strings.NewReader(body))
	cfg := c.s.Config()
	req.SetBasicAuth(cfg.Email+"/token", cfg.Token)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	return c.do(req)
}

func (c *client) zendeskLookup(externalID string) reply {
	req, _ := http.NewRequest(http.MethodGet, c.s.URL()+"/api/v2/tickets?external_id="+externalID, nil)
	cfg := c.s.Config()
	req.SetBasicAuth(cfg.Email+"/token", cfg.Token)
	return c.do(req)
}

// sign sets the Standard Webhooks headers for data under id, each request
// a second after the one before on the fake's clock (as a real client's
// resends are), so that no two are identical; signature, when not "",
// replaces the computed one.
func (c *client) sign(h http.Header, id string, data []byte, signature string) {
	at := c.s.Now().Add(time.Duration(c.n.Add(1)) * time.Second)
	fakehelpdesk.SignHeaders(h, c.s.Config().Secret, id, at, data)
	if signature != "" {
		h.Set("webhook-signature", signature)
	}
}

func (c *client) webhookCreate(key, body, signature string) reply {
	req, _ := http.NewRequest(http.MethodPost, c.s.WebhookURL(), strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	id := key
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	} else {
		id = "no-key"
	}
	c.sign(req.Header, id, []byte(body), signature)
	return c.do(req)
}

func (c *client) webhookLookup(key, signature string) reply {
	param := "idempotency_key=" + key
	req, _ := http.NewRequest(http.MethodGet, c.s.WebhookURL()+"?team=a&"+param, nil)
	c.sign(req.Header, key, []byte(param), signature)
	return c.do(req)
}

func zBody(externalID, subject string) string {
	return fmt.Sprintf(`{"ticket":{"subject":%q,"comment":{"body":"b"},"priority":"normal","external_id":%q}}`, subject, externalID)
}

func ticketID(t *testing.T, body string) int64 {
	t.Helper()
	var out struct {
		Ticket struct {
			ID int64 `json:"id"`
		} `json:"ticket"`
	}
	if err := json.Unmarshal([]byte(body), &out); err != nil || out.Ticket.ID == 0 {
		t.Fatalf("no ticket id in %q: %v", body, err)
	}
	return out.Ticket.ID
}

func want(t *testing.T, r reply, status int, contains string) {
	t.Helper()
	if r.err != nil || r.status != status || !strings.Contains(r.body, contains) {
		t.Fatalf("got %d %q (err %v); want %d containing %q", r.status, r.body, r.err, status, contains)
	}
}

func TestZendeskIdempotency(t *testing.T) {
	s := fakehelpdesk.New(t, fakehelpdesk.Config{})
	c := newClient(t, s, 5*time.Second)

	first := c.zendeskCreate("k1", zBody("k1", "a"))
	want(t, first, 201, `"external_id":"k1"`)
	id := ticketID(t, first.body)

	again := c.zendeskCreate("k1", zBody("k1", "a"))
	want(t, again, 201, "")
	if ticketID(t, again.body) != id || again.body != first.body {
		t.Fatalf("replay %q; want the first answer %q", again.body, first.body)
	}
	want(t, c.zendeskCreate("k1", zBody("k1", "other")), 400, `"error":"IdempotentRequestError"`)
	if s.Held("k1") != 1 || s.Total() != 1 {
		t.Fatalf("held %d total %d; want 1 1", s.Held("k1"), s.Total())
	}

	// Past the key's lifetime a resend creates a second ticket.
	s.Advance(fakehelpdesk.DefaultKeyTTL)
	second := c.zendeskCreate("k1", zBody("k1", "a"))
	want(t, second, 201, "")
	if ticketID(t, second.body) == id || s.Held("k1") != 2 {
		t.Fatalf("after the TTL: %q, held %d; want a new ticket", second.body, s.Held("k1"))
	}

	var list struct {
		Tickets []struct {
			ID        int64  `json:"id"`
			CreatedAt string `json:"created_at"`
		} `json:"tickets"`
	}
	look := c.zendeskLookup("k1")
	want(t, look, 200, "")
	if err := json.Unmarshal([]byte(look.body), &list); err != nil || len(list.Tickets) != 2 {
		t.Fatalf("lookup %q: %v", look.body, err)
	}
	older, err1 := time.Parse(time.RFC3339, list.Tickets[1].CreatedAt)
	newer, err2 := time.Parse(time.RFC3339, list.Tickets[0].CreatedAt)
	if list.Tickets[0].ID != ticketID(t, second.body) || list.Tickets[1].ID != id ||
		err1 != nil || err2 != nil || newer.Sub(older) < fakehelpdesk.DefaultKeyTTL {
		t.Fatalf("lookup %+v; want newest first with the fake clock's dates", list.Tickets)
	}
	want(t, c.zendeskLookup("nope"), 200, `"tickets":[]`)
	if s.Requests(fakehelpdesk.ZendeskCreate) != 4 || s.Requests(fakehelpdesk.ZendeskLookup) != 2 {
		t.Fatalf("requests %d %d", s.Requests(fakehelpdesk.ZendeskCreate), s.Requests(fakehelpdesk.ZendeskLookup))
	}
}

func TestZendeskRefusesBadRequests(t *testing.T) {
	s := fakehelpdesk.New(t, fakehelpdesk.Config{})
	c := newClient(t, s, 5*time.Second)
	req, _ := http.NewRequest(http.MethodPost, s.URL()+"/api/v2/tickets", strings.NewReader(zBody("k", "a")))
	req.SetBasicAuth(s.Config().Email+"/token", "wrong")
	want(t, c.do(req), 401, "authenticate")
	want(t, c.zendeskCreate("k", "not json"), 400, "InvalidJSON")
	want(t, c.zendeskCreate("k", `{"ticket":{"subject":"a"}}`), 422, "RecordInvalid")
	req, _ = http.NewRequest(http.MethodGet, s.URL()+"/elsewhere", nil)
	want(t, c.do(req), 404, "")
	if s.Total() != 0 || s.Requests(fakehelpdesk.Other) != 1 {
		t.Fatalf("total %d other %d", s.Total(), s.Requests(fakehelpdesk.Other))
	}
}

func TestWebhook(t *testing.T) {
	s := fakehelpdesk.New(t, fakehelpdesk.Config{})
	c := newClient(t, s, 5*time.Second)
	body := `{"ticket_id":"k1"}`

	want(t, c.webhookCreate("k1", body, "v1,AAAA"), 401, "signature")
	want(t, c.webhookCreate("", body, ""), 400, "Idempotency-Key")
	want(t, c.webhookCreate("k1", "[1", ""), 400, "JSON")
	want(t, c.webhookLookup("k1", ""), 404, "")

	first := c.webhookCreate("k1", body, "")
	want(t, first, 201, `{"id":"WH-1","url":"`+s.URL()+`/tickets/WH-1"}`)
	want(t, c.webhookCreate("k1", body, ""), 201, `"id":"WH-1"`)
	want(t, c.webhookCreate("k1", `{"ticket_id":"k1","x":1}`, ""), 422, "another body")
	want(t, c.webhookLookup("k1", "v1,AAAA"), 401, "")
	want(t, c.webhookLookup("k1", ""), 200, `"id":"WH-1"`)
	if s.Held("k1") != 1 || s.Total() != 1 {
		t.Fatalf("held %d total %d", s.Held("k1"), s.Total())
	}
	last := s.Received()[len(s.Received())-1]
	if last.Kind != fakehelpdesk.WebhookLookup || last.RawQuery != "team=a&idempotency_key=k1" {
		t.Fatalf("last request %+v", last)
	}

	s.Advance(fakehelpdesk.DefaultKeyTTL)
	want(t, c.webhookCreate("k1", `{"ticket_id":"k1","x":1}`, ""), 201, `"id":"WH-2"`)
	if s.Held("k1") != 2 {
		t.Fatalf("held %d after the TTL; want 2", s.Held("k1"))
	}
}

func TestWebhookReplies(t *testing.T) {
	cases := []struct {
		r      fakehelpdesk.Reply
		status int
		body   string
	}{
		{fakehelpdesk.ReplyNumberID, 201, `{"id":1,"url":"URL/tickets/1"}`},
		{fakehelpdesk.ReplyNoURL, 201, `{"id":"WH-1"}`},
		{fakehelpdesk.ReplyNoID, 201, `{"status":"accepted"}`},
		{fakehelpdesk.ReplyEmpty, 204, ``},
		{fakehelpdesk.ReplyText, 200, `ok`},
	}
	for _, tc := range cases {
		s := fakehelpdesk.New(t, fakehelpdesk.Config{})
		s.SetWebhookReply(tc.r)
		r := newClient(t, s, 5*time.Second).webhookCreate("k", `{}`, "")
		if r.status != tc.status || r.body != strings.ReplaceAll(tc.body, "URL", s.URL()) {
			t.Errorf("reply %d: %d %q", tc.r, r.status, r.body)
		}
	}
}

func TestFaults(t *testing.T) {
	cases := []struct {
		name       string
		fault      fakehelpdesk.Fault
		status     int // 0: no answer
		retryAfter string
		held       int
	}{
		{"commit then drop", fakehelpdesk.CommitThenDrop(), 0, "", 1},
		{"drop", fakehelpdesk.Drop(), 0, "", 0},
		{"commit then 500", fakehelpdesk.CommitThenStatus(500), 500, "", 1},
		{"commit then 503", fakehelpdesk.CommitThenStatus(503), 503, "", 1},
		{"429", fakehelpdesk.TooManyRequests("30"), 429, "30", 0},
		{"503", fakehelpdesk.Unavailable("Wed, 21 Oct 2026 07:28:00 GMT"), 503, "Wed, 21 Oct 2026 07:28:00 GMT", 0},
		{"409", fakehelpdesk.InProgress(), 409, "", 0},
		{"422", fakehelpdesk.Refuse(422), 422, "", 0},
		{"400 idempotent", fakehelpdesk.IdempotentRequestError(), 400, "", 0},
		{"commit then slow", fakehelpdesk.CommitThenSlow(2 * time.Second), 0, "", 1},
		{"slow, then commit", fakehelpdesk.Fault{Delay: 2 * time.Second}, 0, "", 0},
		{"late but in time", fakehelpdesk.Fault{Delay: 10 * time.Millisecond}, 201, "", 1},
	}
	for _, tc := range cases {
		for _, kind := range []fakehelpdesk.Kind{fakehelpdesk.ZendeskCreate, fakehelpdesk.WebhookCreate} {
			t.Run(tc.name+"/"+string(kind), func(t *testing.T) {
				s := fakehelpdesk.New(t, fakehelpdesk.Config{})
				c := newClient(t, s, 300*time.Millisecond)
				s.Script(fakehelpdesk.Rule{Kind: kind, N: 1, Fault: tc.fault})
				send := func() reply {
					if kind == fakehelpdesk.ZendeskCreate {
						return c.zendeskCreate("k", zBody("k", "a"))
					}
					return c.webhookCreate("k", `{"ticket_id":"k"}`, "")
				}
				r := send()
				if tc.status == 0 && r.err == nil {
					t.Fatalf("got %d %q; want no answer", r.status, r.body)
				}
				if tc.status != 0 && (r.err != nil || r.status != tc.status || r.header.Get("Retry-After") != tc.retryAfter) {
					t.Fatalf("got %d %v (Retry-After %q); want %d %q", r.status, r.err, r.header.Get("Retry-After"), tc.status, tc.retryAfter)
				}
				for s.InFlight() > 0 {
					time.Sleep(time.Millisecond)
				}
				if got := s.Held("k"); got != tc.held {
					t.Fatalf("held %d; want %d", got, tc.held)
				}
				// The rule is spent: the resend is served normally and
				// never makes a second ticket. (A slow answer is still
				// pending for a moment after the client gave up; a resend
				// meanwhile would get 409.)
				for s.InFlight() > 0 {
					time.Sleep(time.Millisecond)
				}
				want(t, send(), 201, "")
				if s.Held("k") != 1 || s.Requests(kind) != 2 {
					t.Fatalf("after the resend: held %d, requests %d", s.Held("k"), s.Requests(kind))
				}
			})
		}
	}
}

func TestRulesByNumberKeyAndTimes(t *testing.T) {
	s := fakehelpdesk.New(t, fakehelpdesk.Config{})
	c := newClient(t, s, 5*time.Second)
	s.Script(fakehelpdesk.Rule{Kind: fakehelpdesk.WebhookCreate, N: 2, Fault: fakehelpdesk.Unavailable("1")})
	s.Script(fakehelpdesk.Rule{Kind: fakehelpdesk.WebhookCreate, Key: "b", Times: 2, Fault: fakehelpdesk.TooManyRequests("2")})
	s.Script(fakehelpdesk.Rule{Kind: fakehelpdesk.ZendeskLookup, Fault: fakehelpdesk.Unavailable("3")})

	want(t, c.webhookCreate("a", `{}`, ""), 201, "")   // 1
	want(t, c.webhookCreate("a", `{}`, ""), 503, "")   // 2: by number
	want(t, c.webhookCreate("b", `{}`, ""), 429, "")   // 3: by key
	want(t, c.webhookCreate("c", `{}`, ""), 201, "")   // 4: another key
	want(t, c.webhookCreate("b", `{}`, ""), 429, "")   // 5: by key, second time
	want(t, c.webhookCreate("b", `{}`, ""), 201, "")   // 6: spent
	want(t, c.zendeskLookup("a"), 503, "")             // any lookup, once
	want(t, c.zendeskLookup("a"), 200, `"tickets":[]`) // spent
	if s.Total() != 3 || s.Requests(fakehelpdesk.WebhookCreate) != 6 || s.Connections() != 8 {
		t.Fatalf("total %d, requests %d, connections %d", s.Total(), s.Requests(fakehelpdesk.WebhookCreate), s.Connections())
	}
}

// TestInProgress: while a create under a key is being answered slowly, a
// second one under the same key is answered 409, and creates nothing.
func TestInProgress(t *testing.T) {
	for _, kind := range []fakehelpdesk.Kind{fakehelpdesk.ZendeskCreate, fakehelpdesk.WebhookCreate} {
		s := fakehelpdesk.New(t, fakehelpdesk.Config{})
		c := newClient(t, s, 10*time.Second)
		s.Script(fakehelpdesk.Rule{Kind: kind, N: 1, Fault: fakehelpdesk.CommitThenSlow(time.Second)})
		send := func() reply {
			if kind == fakehelpdesk.ZendeskCreate {
				return c.zendeskCreate("k", zBody("k", "a"))
			}
			return c.webhookCreate("k", `{}`, "")
		}
		done := make(chan reply)
		go func() { done <- send() }()
		for s.Requests(kind) < 1 {
			time.Sleep(time.Millisecond)
		}
		want(t, send(), 409, "InProgress")
		want(t, <-done, 201, "")
		if s.Held("k") != 1 {
			t.Fatalf("%s: held %d", kind, s.Held("k"))
		}
	}
}

// A create held by LateCommitUnlocked is never answered and commits once
// the fake's clock has moved on: a second create under its key before then
// gets no 409 and makes a ticket of its own, and the held one still
// commits (two tickets); a second create after the commit is answered from
// the key's record (one ticket).
func TestLateCommitUnlocked(t *testing.T) {
	for _, kind := range []fakehelpdesk.Kind{fakehelpdesk.ZendeskCreate, fakehelpdesk.WebhookCreate} {
		for _, before := range []bool{true, false} {
			s := fakehelpdesk.New(t, fakehelpdesk.Config{})
			s.Script(fakehelpdesk.Rule{Kind: kind, N: 1, Fault: fakehelpdesk.LateCommitUnlocked(5 * time.Second)})
			send := func(c *client) reply {
				if kind == fakehelpdesk.ZendeskCreate {
					return c.zendeskCreate("k", zBody("k", "a"))
				}
				return c.webhookCreate("k", `{}`, "")
			}
			if r := send(newClient(t, s, 200*time.Millisecond)); r.err == nil {
				t.Fatalf("%s: the held create was answered %d", kind, r.status)
			}
			if s.Held("k") != 0 {
				t.Fatalf("%s: held %d before the commit", kind, s.Held("k"))
			}
			c := newClient(t, s, 10*time.Second)
			wantHeld := 1
			if before {
				want(t, send(c), 201, "")
				wantHeld = 2
				s.Advance(5 * time.Second)
			} else {
				s.Advance(5 * time.Second)
				want(t, send(c), 201, "")
			}
			if s.Held("k") != wantHeld || s.Total() != wantHeld {
				t.Fatalf("%s, second create before the commit %t: held %d, total %d; want %d", kind, before, s.Held("k"), s.Total(), wantHeld)
			}
		}
	}
}

func TestLookupLag(t *testing.T) {
	s := fakehelpdesk.New(t, fakehelpdesk.Config{})
	c := newClient(t, s, 5*time.Second)
	s.SetLookupLag(2, 0)
	want(t, c.zendeskCreate("z", zBody("z", "a")), 201, "")
	want(t, c.webhookCreate("w", `{}`, ""), 201, "")
	for range 2 {
		want(t, c.zendeskLookup("z"), 200, `"tickets":[]`)
		want(t, c.webhookLookup("w", ""), 404, "")
	}
	want(t, c.zendeskLookup("z"), 200, `"external_id":"z"`)
	want(t, c.webhookLookup("w", ""), 200, `"id":"WH-1"`)

	// The fake's clock runs with the real one, so the lag is an hour: the
	// few real seconds a test takes do not end it.
	s.SetLookupLag(0, time.Hour)
	want(t, c.webhookCreate("w2", `{}`, ""), 201, "")
	want(t, c.webhookLookup("w2", ""), 404, "")
	s.Advance(59 * time.Minute)
	want(t, c.webhookLookup("w2", ""), 404, "")
	s.Advance(time.Minute)
	want(t, c.webhookLookup("w2", ""), 200, `"id":"WH-2"`)
}

func TestAddZendeskTicket(t *testing.T) {
	s := fakehelpdesk.New(t, fakehelpdesk.Config{})
	c := newClient(t, s, 5*time.Second)
	newer := s.AddZendeskTicket("k", s.Now())
	older := s.AddZendeskTicket("k", s.Now().Add(-time.Hour))
	r := c.zendeskLookup("k")
	want(t, r, 200, fmt.Sprintf(`"id":%d`, older))
	if !strings.Contains(r.body, fmt.Sprintf(`"id":%d`, newer)) || s.Held("k") != 2 {
		t.Fatalf("lookup %q", r.body)
	}
}

// TestConcurrent: many clients at once, some sharing keys; run with -race.
func TestConcurrent(t *testing.T) {
	s := fakehelpdesk.New(t, fakehelpdesk.Config{})
	c := newClient(t, s, 10*time.Second)
	s.Script(fakehelpdesk.Rule{Kind: fakehelpdesk.WebhookCreate, Key: "k3", Times: 1000, Fault: fakehelpdesk.Unavailable("1")})
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			key := fmt.Sprintf("k%d", i%8)
			if i%2 == 0 {
				c.zendeskCreate(key, zBody(key, "a"))
				c.zendeskLookup(key)
			} else {
				c.webhookCreate(key, `{}`, "")
				c.webhookLookup(key, "")
			}
			s.Held(key)
			s.Received()
		})
	}
	wg.Wait()
	// 8 keys: even i use k0,k2,k4,k6 on Zendesk; odd i use k1,k3,k5,k7 on
	// the webhook, where k3 is always refused with 503. A create racing
	// another under the same key may get 409, and then its key may hold
	// no ticket yet, so resend each once more, sequentially.
	for i := range 8 {
		key := fmt.Sprintf("k%d", i)
		if i%2 == 0 {
			c.zendeskCreate(key, zBody(key, "a"))
		} else {
			c.webhookCreate(key, `{}`, "")
		}
	}
	for i := range 8 {
		wantHeld := 1
		if i == 3 {
			wantHeld = 0
		}
		if got := s.Held(fmt.Sprintf("k%d", i)); got != wantHeld {
			t.Errorf("k%d held %d; want %d", i, got, wantHeld)
		}
	}
	if s.Total() != 7 || s.Requests(fakehelpdesk.ZendeskCreate) != 24 || s.Requests(fakehelpdesk.WebhookCreate) != 24 ||
		s.Requests(fakehelpdesk.ZendeskLookup) != 20 || s.Requests(fakehelpdesk.WebhookLookup) != 20 ||
		len(s.Received()) != 88 {
		t.Fatalf("total %d, received %d", s.Total(), len(s.Received()))
	}
}

// TestSlowAnswerEndsWithTheClient: a slow answer does not outlive the
// client that gave up on it, so Close does not wait for the full delay.
func TestSlowAnswerEndsWithTheClient(t *testing.T) {
	s := fakehelpdesk.New(t, fakehelpdesk.Config{})
	s.Script(fakehelpdesk.Rule{Kind: fakehelpdesk.WebhookCreate, Fault: fakehelpdesk.CommitThenSlow(time.Hour)})
	if r := newClient(t, s, 200*time.Millisecond).webhookCreate("k", `{}`, ""); r.err == nil {
		t.Fatal("the slow answer came")
	}
	s.Close() // returns once the handler saw the client leave
	if s.Held("k") != 1 {
		t.Fatalf("held %d", s.Held("k"))
	}
}
