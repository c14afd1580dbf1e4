package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/helpdesk/httpsend"
	"github.com/aivax-examples/idempotent-callback/internal/urls"
)

// Config is a webhook destination.
type Config struct {
	URL string // https (http only for loopback); may carry a query
	// Secret is the Standard Webhooks signing secret: "whsec_" (optional)
	// and base64; the HMAC key is its decoding. Never printed.
	Secret  string
	Lookup  bool          // the endpoint answers GET ?idempotency_key=
	Timeout time.Duration // per call; 0 means httpsend.DefaultTimeout
	// Now is the clock of webhook-timestamp and of Retry-After dates;
	// nil: time.Now.
	Now func() time.Time
}

// SecretPrefix starts a Standard Webhooks secret; it is optional.
const SecretPrefix = "whsec_"

// DecodeSecret is the HMAC key of a Standard Webhooks secret: the standard
// base64 after an optional "whsec_", as the convention's libraries read
// it. This is the one rule for secrets, applied by New, which runs at
// start, so a secret that does not decode stops the program there. Its
// errors never quote the secret.
func DecodeSecret(secret string) ([]byte, error) {
	if secret == "" {
		return nil, errors.New("required (a webhook needs secret to sign its requests)")
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, SecretPrefix))
	if err != nil {
		return nil, errors.New("not " + SecretPrefix + " followed by base64 (value not shown); make one with: echo \"" + SecretPrefix + "$(head -c 32 /dev/urandom | base64)\"")
	}
	if len(key) == 0 {
		return nil, errors.New(SecretPrefix + " is followed by no key (value not shown)")
	}
	return key, nil
}

// settings is how the configuration is shown: the secret and the URL
// redacted (the URL's scheme and host only: its path or query may carry
// a token).
func (c Config) settings() httpsend.Settings {
	return httpsend.Settings{Kind: "webhook", URL: c.URL, Timeout: c.Timeout,
		Attrs: []slog.Attr{httpsend.Secret("secret", c.Secret), slog.Bool("lookup", c.Lookup)}}
}

// String shows the configuration without the secret, the URL redacted.
func (c Config) String() string { return c.settings().String() }

// GoString is String, so that %#v does not print the secret either.
func (c Config) GoString() string { return c.String() }

// LogValue logs the configuration without the secret, the URL redacted.
func (c Config) LogValue() slog.Value { return c.settings().LogValue() }

// Client is a delivery.Destination for a webhook.
type Client struct {
	cfg  Config
	u    *url.URL
	key  []byte
	http *httpsend.Client
}

var (
	_ delivery.Destination  = (*Client)(nil)
	_ delivery.EffectSender = (*Client)(nil)
)

// New checks c and returns a Client. The URL and secret rules live here
// alone; a refused URL or secret is an *httpsend.SettingError.
func New(c Config) (*Client, error) {
	u, err := httpsend.CheckURL(c.URL)
	if err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}
	if u.Query().Has("idempotency_key") {
		return nil, fmt.Errorf("webhook: %w", httpsend.Refused("url",
			fmt.Sprintf("url %q: its query must not carry idempotency_key, which lookups add", urls.Redacted(u))))
	}
	key, err := DecodeSecret(c.Secret)
	if err != nil {
		return nil, fmt.Errorf("webhook: %w", &httpsend.SettingError{Field: "secret", Err: fmt.Errorf("secret: %w", err)})
	}
	hc, err := httpsend.NewChecked(httpsend.Options{Timeout: c.Timeout, Now: c.Now})
	if err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}
	return &Client{cfg: c, u: u, key: key, http: hc}, nil
}

// String shows the client without the secret.
func (c *Client) String() string { return c.cfg.String() }

// LogValue logs the client without the secret.
func (c *Client) LogValue() slog.Value { return c.cfg.LogValue() }

// TicketCreated is the "type" of a ticket's own body, beside the
// follow-ups' "comment.created" and "ticket.closed", so that a receiver
// tells the three apart by one field.
const TicketCreated = "ticket.created"

// body is the request body, fields in this order.
type body struct {
	Type         string `json:"type"`
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
func Body(t delivery.HelpdeskTicket) ([]byte, error) {
	return json.Marshal(body{Type: TicketCreated, TicketID: t.ID, OperationKey: t.OperationKey, TenantID: t.TenantID,
		UserID: t.UserID, Title: t.Title, Description: t.Description, Priority: t.Priority,
		CreatedAt: t.CreatedAt.UTC().Format(time.RFC3339)})
}

// Sign is the Standard Webhooks webhook-signature of data for message id
// at the unix second of at, under key (DecodeSecret's bytes): "v1," and the
// standard base64 of HMAC-SHA256 over "{id}.{unix seconds}.{data}".
func Sign(key []byte, id string, at time.Time, data []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + strconv.FormatInt(at.Unix(), 10) + "."))
	m.Write(data)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// sign sets the three Standard Webhooks headers for data under id, with
// this moment as the timestamp: every send and lookup is signed afresh.
func (c *Client) sign(h http.Header, id string, data []byte) {
	at := c.http.Now()
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", strconv.FormatInt(at.Unix(), 10))
	h.Set("webhook-signature", Sign(c.key, id, at, data))
}

// Send posts the ticket once.
func (c *Client) Send(ctx context.Context, t delivery.HelpdeskTicket) (delivery.Receipt, error) {
	b, err := httpsend.TicketBody("webhook", t, Body)
	if err != nil {
		return delivery.Receipt{}, err
	}
	return c.post(ctx, t.ID, b)
}

// SendEffect posts the effect once, whatever its kind: its payload byte for
// byte, under its delivery key as webhook-id and Idempotency-Key, signed
// and classified as a ticket's send.
func (c *Client) SendEffect(ctx context.Context, e delivery.Effect) (delivery.Receipt, error) {
	if err := httpsend.CheckEffect("webhook", e); err != nil {
		return delivery.Receipt{}, err
	}
	if !isObject(e.Payload) {
		return delivery.Receipt{}, &delivery.SendError{Failure: delivery.Refused,
			Err: fmt.Errorf("webhook: %s effect %s: its payload is not a JSON object", e.Kind, e.ID)}
	}
	return c.post(ctx, e.ID, e.Payload)
}

// LookupEffect asks the endpoint for the effect under its delivery key,
// exactly as Lookup does for a ticket.
func (c *Client) LookupEffect(ctx context.Context, e delivery.Effect) (delivery.Receipt, bool, error) {
	return c.Lookup(ctx, e.ID)
}

// post sends b once under key, signed afresh.
func (c *Client) post(ctx context.Context, key string, b []byte) (delivery.Receipt, error) {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json")
	h.Set("Idempotency-Key", key)
	c.sign(h, key, b)
	req := httpsend.Request{Method: http.MethodPost, URL: c.u, Header: h, Body: b}
	resp, err := c.http.Do(ctx, req)
	if err != nil {
		return delivery.Receipt{}, err
	}
	// 409 is Unknown; 401, 403 and 404 are Misconfigured; 400, 422 and
	// the other 4xx but 408 and 429 are refusals: httpsend's table is this
	// destination's.
	if se := httpsend.Classify(req, resp); se != nil {
		return delivery.Receipt{}, se
	}
	return receipt(key, resp.Body), nil
}

// Lookup asks the endpoint for the ticket under id, when configured to.
func (c *Client) Lookup(ctx context.Context, id string) (delivery.Receipt, bool, error) {
	if !c.cfg.Lookup {
		return delivery.Receipt{}, false, delivery.ErrNoLookup
	}
	if err := httpsend.CheckLookupID("webhook", id); err != nil {
		return delivery.Receipt{}, false, err
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
	c.sign(h, id, []byte("idempotency_key="+id)) // the parameter's text, unescaped
	req := httpsend.Request{Method: http.MethodGet, URL: &u, Header: h}
	resp, err := c.http.Do(ctx, req)
	if err != nil {
		return delivery.Receipt{}, false, fmt.Errorf("webhook lookup: %w", err)
	}
	switch {
	case resp.Status == http.StatusOK && isObject(resp.Body):
		return receipt(id, resp.Body), true, nil
	case resp.Status == http.StatusNotFound:
		return delivery.Receipt{}, false, nil
	}
	return delivery.Receipt{}, false, fmt.Errorf("webhook lookup: %w", lookupError(req, resp))
}

// lookupError is the error of a lookup answered with neither found (200
// and a JSON object) nor absent (404): httpsend.LookupError's, with the
// status, Retry-After and a clipped body, saying so of an empty or
// non-object 2xx.
func lookupError(req httpsend.Request, resp *httpsend.Response) *delivery.SendError {
	se := httpsend.LookupError(req, resp)
	if resp.Status >= 200 && resp.Status < 300 {
		se.Err = fmt.Errorf("%w, which is neither found (200 and a JSON object) nor absent (404)", se.Err)
	}
	return se
}

// isObject reports whether b is a JSON object.
func isObject(b []byte) bool {
	var obj map[string]json.RawMessage
	return json.Unmarshal(b, &obj) == nil && obj != nil
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
