package zendesk

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/helpdesk/httpsend"
)

// Config is a Zendesk destination.
type Config struct {
	URL     string        // https://{subdomain}.zendesk.com (http only for loopback)
	Email   string        // the agent the API token belongs to
	Token   string        // the API token; never printed
	Timeout time.Duration // per call; 0 means httpsend.DefaultTimeout
	// Now is the clock Retry-After dates are read against; nil: time.Now.
	Now func() time.Time
}

// settings is how the configuration is shown: the token and the URL
// redacted.
func (c Config) settings() httpsend.Settings {
	return httpsend.Settings{Kind: "zendesk", URL: c.URL, Timeout: c.Timeout,
		Attrs: []slog.Attr{slog.String("email", c.Email), httpsend.Secret("token", c.Token)}}
}

// String shows the configuration without the token, the URL redacted.
func (c Config) String() string { return c.settings().String() }

// GoString is String, so that %#v does not print the token either.
func (c Config) GoString() string { return c.String() }

// LogValue logs the configuration without the token, the URL redacted.
func (c Config) LogValue() slog.Value { return c.settings().LogValue() }

// Client is a delivery.Destination for Zendesk.
type Client struct {
	cfg  Config
	base string // URL without a trailing slash
	auth string
	http *httpsend.Client
}

var (
	_ delivery.Destination  = (*Client)(nil)
	_ delivery.EffectSender = (*Client)(nil)
)

// New checks c and returns a Client: the URL by httpsend's rules for a
// base URL, the email and token by Zendesk's; a refused URL, email or
// token is an *httpsend.SettingError.
func New(c Config) (*Client, error) {
	u, err := httpsend.CheckBaseURL(c.URL)
	if err != nil {
		return nil, fmt.Errorf("zendesk: %w", err)
	}
	if strings.TrimSpace(c.Email) == "" {
		return nil, fmt.Errorf("zendesk: %w", httpsend.Refused("email", "email is required (Zendesk authenticates with email and token)"))
	}
	if c.Token == "" {
		return nil, fmt.Errorf("zendesk: %w", httpsend.Refused("token", "token is required (Zendesk authenticates with email and token)"))
	}
	hc, err := httpsend.NewChecked(httpsend.Options{Timeout: c.Timeout, Now: c.Now})
	if err != nil {
		return nil, fmt.Errorf("zendesk: %w", err)
	}
	return &Client{
		cfg:  c,
		base: strings.TrimRight(u.String(), "/"),
		auth: "Basic " + base64.StdEncoding.EncodeToString([]byte(c.Email+"/token:"+c.Token)),
		http: hc,
	}, nil
}

// String shows the client without the token.
func (c *Client) String() string { return c.cfg.String() }

// LogValue logs the client without the token.
func (c *Client) LogValue() slog.Value { return c.cfg.LogValue() }

// createBody is the body of POST /api/v2/tickets, fields in this order.
type createBody struct {
	Ticket createTicket `json:"ticket"`
}

type createTicket struct {
	Subject    string        `json:"subject"`
	Comment    createComment `json:"comment"`
	Priority   string        `json:"priority"`
	ExternalID string        `json:"external_id"`
}

type createComment struct {
	Body string `json:"body"`
}

// Body is the exact request body Send sends for t: the same bytes on every
// resend.
func Body(t delivery.HelpdeskTicket) ([]byte, error) {
	comment := t.Description
	if comment == "" {
		comment = t.Title
	}
	return json.Marshal(createBody{Ticket: createTicket{Subject: t.Title,
		Comment: createComment{Body: comment}, Priority: t.Priority, ExternalID: t.ID}})
}

// Send creates the ticket once.
func (c *Client) Send(ctx context.Context, t delivery.HelpdeskTicket) (delivery.Receipt, error) {
	body, err := httpsend.TicketBody("zendesk", t, Body)
	if err != nil {
		return delivery.Receipt{}, err
	}
	req := httpsend.Request{Method: http.MethodPost, URL: c.url("/api/v2/tickets", ""),
		Header: c.header(), Body: body}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", t.ID)
	resp, err := c.http.Do(ctx, req)
	if err != nil {
		return delivery.Receipt{}, err
	}
	if resp.Status == http.StatusBadRequest && isIdempotentRequestError(resp.Body) {
		// The key is known with another body: a ticket may exist.
		return delivery.Receipt{}, httpsend.StatusError(req, resp, delivery.Unknown)
	}
	if se := httpsend.Classify(req, resp); se != nil {
		return delivery.Receipt{}, se
	}
	var out struct {
		Ticket *zTicket `json:"ticket"`
	}
	if err := json.Unmarshal(resp.Body, &out); err != nil || out.Ticket == nil {
		return delivery.Receipt{}, &delivery.SendError{Failure: delivery.Unknown, Status: resp.Status,
			Err: fmt.Errorf("zendesk: answer %d without a readable ticket%s", resp.Status, httpsend.Scrub(httpsend.Excerpt(resp.Body), req.URL))}
	}
	id, err := out.Ticket.idString()
	if err != nil {
		return delivery.Receipt{}, &delivery.SendError{Failure: delivery.Unknown, Status: resp.Status,
			Err: fmt.Errorf("zendesk: answer %d: %v", resp.Status, err)}
	}
	return c.receipt(id), nil
}

// Lookup finds the oldest ticket whose external_id is id.
func (c *Client) Lookup(ctx context.Context, id string) (delivery.Receipt, bool, error) {
	if err := httpsend.CheckLookupID("zendesk", id); err != nil {
		return delivery.Receipt{}, false, err
	}
	req := httpsend.Request{Method: http.MethodGet,
		URL: c.url("/api/v2/tickets", "external_id="+url.QueryEscape(id)), Header: c.header()}
	resp, err := c.http.Do(ctx, req)
	if err != nil {
		return delivery.Receipt{}, false, fmt.Errorf("zendesk lookup: %w", err)
	}
	if resp.Status != http.StatusOK {
		return delivery.Receipt{}, false, fmt.Errorf("zendesk lookup: %w", httpsend.LookupError(req, resp))
	}
	var out struct {
		Tickets *[]zTicket `json:"tickets"`
	}
	if err := json.Unmarshal(resp.Body, &out); err != nil || out.Tickets == nil {
		return delivery.Receipt{}, false, fmt.Errorf("zendesk lookup: %w", &delivery.SendError{Failure: delivery.Unknown,
			Status: resp.Status, Err: fmt.Errorf("answer without a tickets list%s", httpsend.Scrub(httpsend.Excerpt(resp.Body), req.URL))})
	}
	best, err := oldest(*out.Tickets)
	if err != nil {
		return delivery.Receipt{}, false, fmt.Errorf("zendesk lookup: %w", &delivery.SendError{Failure: delivery.Unknown,
			Status: resp.Status, Err: err})
	}
	if best == "" {
		return delivery.Receipt{}, false, nil
	}
	return c.receipt(best), true, nil
}

// zTicket is what we read of a Zendesk ticket.
type zTicket struct {
	ID        json.Number `json:"id"`
	CreatedAt string      `json:"created_at"`
}

func (t zTicket) idString() (string, error) {
	n, err := strconv.ParseUint(string(t.ID), 10, 64)
	if err != nil || n == 0 {
		return "", fmt.Errorf("ticket id %q is not a positive integer", string(t.ID))
	}
	return strconv.FormatUint(n, 10), nil
}

// oldest picks the ticket created first (ties: the lower id), "" for none.
func oldest(list []zTicket) (string, error) {
	type entry struct {
		id uint64
		at time.Time
	}
	entries := make([]entry, 0, len(list))
	for _, t := range list {
		s, err := t.idString()
		if err != nil {
			return "", err
		}
		at, err := time.Parse(time.RFC3339, t.CreatedAt)
		if err != nil {
			return "", fmt.Errorf("ticket %s: created_at %q is not RFC 3339", s, t.CreatedAt)
		}
		n, _ := strconv.ParseUint(s, 10, 64)
		entries = append(entries, entry{n, at})
	}
	if len(entries) == 0 {
		return "", nil
	}
	best := slices.MinFunc(entries, func(a, b entry) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return compareUint(a.id, b.id)
	})
	return strconv.FormatUint(best.id, 10), nil
}

func compareUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (c *Client) receipt(id string) delivery.Receipt {
	return delivery.Receipt{ExternalID: id, ExternalURL: c.base + "/agent/tickets/" + id}
}

func (c *Client) url(path, query string) *url.URL {
	u, _ := url.Parse(c.base + path) // base was parsed in New
	u.RawQuery = query
	return u
}

func (c *Client) header() http.Header {
	h := http.Header{}
	h.Set("Authorization", c.auth)
	h.Set("Accept", "application/json")
	return h
}

// isIdempotentRequestError reports whether a 400's body is Zendesk's
// {"error":"IdempotentRequestError",...}.
func isIdempotentRequestError(body []byte) bool {
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return false
	}
	var s string
	return json.Unmarshal(e.Error, &s) == nil && s == "IdempotentRequestError"
}
