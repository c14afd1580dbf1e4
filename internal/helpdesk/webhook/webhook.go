package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/helpdesk/httpsend"
)

// Config is a webhook destination.
type Config struct {
	URL     string        // https (http only for loopback); may carry a query
	Secret  string        // the HMAC-SHA256 key; never printed
	Lookup  bool          // the endpoint answers GET ?idempotency_key=
	Timeout time.Duration // per call; 0 means httpsend.DefaultTimeout
	// Now is the clock Retry-After dates are read against; nil: time.Now.
	Now func() time.Time
}

// String shows the configuration without the secret or the URL's query.
func (c Config) String() string {
	return fmt.Sprintf("webhook{url=%s secret=%s lookup=%t timeout=%s}", httpsend.RedactRaw(c.URL), httpsend.Redacted(c.Secret), c.Lookup, c.Timeout)
}

// GoString is String, so that %#v does not print the secret either.
func (c Config) GoString() string { return c.String() }

// LogValue logs the configuration without the secret or the URL's query.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(slog.String("kind", "webhook"), slog.String("url", httpsend.RedactRaw(c.URL)),
		slog.String("secret", httpsend.Redacted(c.Secret)), slog.Bool("lookup", c.Lookup),
		slog.Duration("timeout", c.Timeout))
}

// Client is a delivery.Destination for a webhook.
type Client struct {
	cfg  Config
	u    *url.URL
	http *httpsend.Client
}

var _ delivery.Destination = (*Client)(nil)

// New checks c and returns a Client.
func New(c Config) (*Client, error) {
	u, err := httpsend.CheckURL(c.URL)
	if err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}
	if c.Secret == "" {
		return nil, errors.New("webhook: secret is required")
	}
	if c.Timeout < 0 {
		return nil, fmt.Errorf("webhook: timeout %s is negative", c.Timeout)
	}
	return &Client{cfg: c, u: u, http: httpsend.New(httpsend.Options{Timeout: c.Timeout, Now: c.Now})}, nil
}

// String shows the client without the secret.
func (c *Client) String() string { return c.cfg.String() }

// LogValue logs the client without the secret.
func (c *Client) LogValue() slog.Value { return c.cfg.LogValue() }

// body is the request body, fields in this order.
type body struct {
	TicketID     string `json:"ticket_id"`
	OperationKey string `json:"operation_key"`
	TenantID     string `json:"tenant_id"`
	UserID       string `json:"user_id"`
	Title        string `json:"title"`
	Description  string `json:"description"`
	Priority     string `json:"priority"`
	CreatedAt    string `json:"created_at"`
}

// Body is the exact request body Send sends for t: the same bytes on every
// resend. created_at is RFC 3339 in UTC to the second, as get_ticket shows
// it, so a store that keeps finer precision changes nothing.
func Body(t delivery.Ticket) ([]byte, error) {
	return json.Marshal(body{TicketID: t.ID, OperationKey: t.OperationKey, TenantID: t.TenantID,
		UserID: t.UserID, Title: t.Title, Description: t.Description, Priority: t.Priority,
		CreatedAt: t.CreatedAt.UTC().Format(time.RFC3339)})
}

// Sign is the X-Signature-256 value of data under secret:
// "sha256=" and the lower-case hex HMAC-SHA256.
func Sign(secret string, data []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(data)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Send posts the ticket once.
func (c *Client) Send(ctx context.Context, t delivery.Ticket) (delivery.Receipt, error) {
	if t.ID == "" {
		return delivery.Receipt{}, &delivery.SendError{Outcome: delivery.Refused,
			Err: errors.New("webhook: ticket has no id to send as Idempotency-Key")}
	}
	b, err := Body(t)
	if err != nil {
		return delivery.Receipt{}, &delivery.SendError{Outcome: delivery.Refused,
			Err: fmt.Errorf("webhook: encoding the ticket: %v", err)}
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json")
	h.Set("Idempotency-Key", t.ID)
	h.Set("X-Signature-256", Sign(c.cfg.Secret, b))
	req := httpsend.Request{Method: http.MethodPost, URL: c.u, Header: h, Body: b}
	resp, err := c.http.Do(ctx, req)
	if err != nil {
		return delivery.Receipt{}, err
	}
	// 409 is Unknown; 400, 422 and the other 4xx but 408 and 429 are
	// refusals: httpsend's table is this destination's.
	if se := httpsend.Classify(req, resp); se != nil {
		return delivery.Receipt{}, se
	}
	return receipt(t.ID, resp.Body), nil
}

// Lookup asks the endpoint for the ticket under id, when configured to.
func (c *Client) Lookup(ctx context.Context, id string) (delivery.Receipt, bool, error) {
	if !c.cfg.Lookup {
		return delivery.Receipt{}, false, delivery.ErrNoLookup
	}
	if id == "" {
		return delivery.Receipt{}, false, errors.New("webhook: lookup without an id")
	}
	param := "idempotency_key=" + url.QueryEscape(id)
	u := *c.u
	if u.RawQuery != "" {
		u.RawQuery += "&" + param
	} else {
		u.RawQuery = param
	}
	u.ForceQuery = false
	h := http.Header{}
	h.Set("Accept", "application/json")
	h.Set("X-Signature-256", Sign(c.cfg.Secret, []byte(param)))
	req := httpsend.Request{Method: http.MethodGet, URL: &u, Header: h}
	resp, err := c.http.Do(ctx, req)
	if err != nil {
		return delivery.Receipt{}, false, fmt.Errorf("webhook lookup: %w", err)
	}
	switch {
	case resp.Status >= 200 && resp.Status < 300:
		return receipt(id, resp.Body), true, nil
	case resp.Status == http.StatusNotFound:
		return delivery.Receipt{}, false, nil
	}
	return delivery.Receipt{}, false, fmt.Errorf("webhook lookup: %w", httpsend.StatusError(req, resp, delivery.Unknown))
}

// receipt reads a 2xx body: a JSON object's "id" (string or number) and
// "url" when present; the external id defaults to the ticket id. Any other
// body (empty, not JSON, not an object) gives the default.
func receipt(ticketID string, b []byte) delivery.Receipt {
	r := delivery.Receipt{ExternalID: ticketID}
	var obj map[string]json.RawMessage
	if json.Unmarshal(b, &obj) != nil {
		return r
	}
	if raw, ok := obj["id"]; ok {
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		var v any
		if d.Decode(&v) == nil {
			switch v := v.(type) {
			case string:
				if v != "" {
					r.ExternalID = v
				}
			case json.Number:
				r.ExternalID = v.String()
			}
		}
	}
	if raw, ok := obj["url"]; ok {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			r.ExternalURL = s
		}
	}
	return r
}
