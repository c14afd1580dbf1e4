package fakehelpdesk

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// SignatureTolerance is how far a webhook-timestamp may be from the fake's
// clock, either way, for the webhook to accept the request.
const SignatureTolerance = 5 * time.Minute

// Reply is the shape of the webhook's 2xx answers.
type Reply int

// Webhook answer shapes.
const (
	ReplyStringID Reply = iota // 201 {"id":"WH-1","url":"{base}/tickets/WH-1"}
	ReplyNumberID              // 201 {"id":1,"url":"{base}/tickets/1"}
	ReplyNoURL                 // 201 {"id":"WH-1"}
	ReplyNoID                  // 201 {"status":"accepted"}
	ReplyEmpty                 // 204, no body
	ReplyText                  // 200 text/plain "ok"
)

type wTicket struct {
	id        int
	key       string
	committed time.Time
	hidden    int
}

// signed verifies a webhook request's Standard Webhooks signature over
// data with the convention's own library, its timestamp against the fake's
// clock, and that the same id, timestamp and signature were not seen
// before. A bad or stale signature answers 401. A replay answers 409
// ("seen before") rather than 401: a client whose two requests for one
// ticket fall in the same second signs them identically, and that is not a
// credentials problem. A legitimate resend a second or more later has a
// new timestamp, so a new signature.
func (s *Server) signed(r *http.Request, data []byte) (answer, bool) {
	bad := jsonAnswer(http.StatusUnauthorized, `{"error":"bad signature"}`)
	if s.verifier.VerifyIgnoringTimestamp(data, r.Header) != nil {
		return bad, false
	}
	secs, err := strconv.ParseInt(r.Header.Get("webhook-timestamp"), 10, 64)
	if err != nil {
		return bad, false
	}
	ts := time.Unix(secs, 0)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.nowLocked()
	if ts.Before(now.Add(-SignatureTolerance)) || ts.After(now.Add(SignatureTolerance)) {
		return jsonAnswer(http.StatusUnauthorized, `{"error":"bad signature: timestamp outside the tolerance"}`), false
	}
	for k, at := range s.seen {
		if at.Before(now.Add(-SignatureTolerance)) {
			delete(s.seen, k) // too old to pass the check above anyway
		}
	}
	id := r.Header.Get("webhook-id") + "\x00" + r.Header.Get("webhook-timestamp") + "\x00" + r.Header.Get("webhook-signature")
	if _, ok := s.seen[id]; ok {
		s.replays++
		if s.cfg.RejectReplays {
			return jsonAnswer(http.StatusConflict, `{"error":"replayed request"}`), false
		}
	}
	s.seen[id] = ts
	return answer{}, true
}

// Sign is the webhook-signature value ("v1,<base64>") of data for the
// message id at the unix second of at under secret (whsec_ and base64),
// as the Standard Webhooks library computes it.
func Sign(secret, id string, at time.Time, data []byte) string {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		panic(fmt.Sprintf("fakehelpdesk.Sign: %v", err))
	}
	sig, err := wh.Sign(id, at, data)
	if err != nil {
		panic(fmt.Sprintf("fakehelpdesk.Sign: %v", err))
	}
	return sig
}

// SignHeaders sets the three Standard Webhooks headers on h for data
// under message id at the given time.
func SignHeaders(h http.Header, secret, id string, at time.Time, data []byte) {
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", strconv.FormatInt(at.Unix(), 10))
	h.Set("webhook-signature", Sign(secret, id, at, data))
}

// webhookCreate creates a webhook ticket; unlocked as for zendeskCreate.
func (s *Server) webhookCreate(key string, body []byte, unlocked bool) answer {
	if key == "" {
		return jsonAnswer(http.StatusBadRequest, `{"error":"Idempotency-Key missing"}`)
	}
	var obj map[string]any
	if err := json.Unmarshal(body, &obj); err != nil {
		return jsonAnswer(http.StatusBadRequest, `{"error":"body is not a JSON object"}`)
	}
	sum := sha256.Sum256(body)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.nowLocked()
	if e, ok := s.liveKey(s.wKeys, key, now); ok && !unlocked {
		if e.sum != sum {
			return jsonAnswer(http.StatusUnprocessableEntity, `{"error":"idempotency key reused with another body"}`)
		}
		return answer{status: e.status, ctype: "application/json", body: e.answer}
	}
	s.wNextID++
	t := &wTicket{id: s.wNextID, key: key, committed: now, hidden: s.lagN}
	s.wTickets = append(s.wTickets, t)
	s.recordWebhook(key, obj)
	a := s.wAnswer(t, http.StatusCreated)
	if _, ok := s.wKeys[key]; !(unlocked && ok) {
		s.wKeys[key] = &idem{sum: sum, at: now, status: a.status, answer: a.body}
	}
	return a
}

// wAnswer is the webhook's answer for t in the current reply shape; s.mu
// is held.
func (s *Server) wAnswer(t *wTicket, status int) answer {
	id := "WH-" + strconv.Itoa(t.id)
	url := s.srv.URL + "/tickets/" + id
	switch s.reply {
	case ReplyNumberID:
		return jsonAnswer(status, fmt.Sprintf(`{"id":%d,"url":%q}`, t.id, s.srv.URL+"/tickets/"+strconv.Itoa(t.id)))
	case ReplyNoURL:
		return jsonAnswer(status, fmt.Sprintf(`{"id":%q}`, id))
	case ReplyNoID:
		return jsonAnswer(status, `{"status":"accepted"}`)
	case ReplyEmpty:
		return answer{status: http.StatusNoContent}
	case ReplyText:
		return answer{status: http.StatusOK, ctype: "text/plain", body: []byte("ok")}
	}
	return jsonAnswer(status, fmt.Sprintf(`{"id":%q,"url":%q}`, id, url))
}

func (s *Server) webhookLookup(key string) answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.wTickets {
		if t.key == key && s.visible(t.committed, &t.hidden) {
			return s.wAnswer(t, http.StatusOK)
		}
	}
	return jsonAnswer(http.StatusNotFound, `{"error":"not found"}`)
}

// recordWebhook adds a committed webhook request to its ticket's order,
// by the body's "type" (a body without one is a ticket's); s.mu is held.
func (s *Server) recordWebhook(key string, obj map[string]any) {
	typ, _ := obj["type"].(string)
	ticket, _ := obj["ticket_id"].(string)
	switch typ {
	case "", "ticket.created":
		s.record(ticket, "create")
	case "comment.created":
		s.record(ticket, "comment:"+key)
	case "ticket.closed":
		s.record(ticket, "close:"+key)
	default:
		s.record(ticket, typ+":"+key)
	}
}
