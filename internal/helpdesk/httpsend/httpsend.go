package httpsend

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/redact"
	"github.com/aivax-examples/idempotent-callback/internal/tracing"
	"github.com/aivax-examples/idempotent-callback/internal/urls"
)

// DefaultTimeout bounds every call when Options.Timeout is zero.
const DefaultTimeout = 10 * time.Second

// maxBody bounds how much of an answer is read.
const maxBody = 1 << 20

// Options configure a Client.
type Options struct {
	// Timeout bounds one call, from dialing to the last byte of the answer.
	// Zero means DefaultTimeout.
	Timeout time.Duration
	// Now is the clock Retry-After dates are read against; nil means
	// time.Now.
	Now func() time.Time
	// Secrets are credentials of the destination that its requests do
	// not carry in a credential header (a signing secret): scrubbed by
	// value, as those are, from every error text the client returns.
	Secrets []string
}

// Client sends one request per call and never resends on its own.
type Client struct {
	hc      *http.Client
	timeout time.Duration
	now     func() time.Time
	secrets redact.Values // Options.Secrets
}

// New returns a Client. Its transport opens a fresh HTTP/1.1 connection for
// every call (see the package documentation for why).
func New(o Options) *Client {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	tr := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: o.Timeout, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout: o.Timeout,
		DisableKeepAlives:   true,
		Protocols:           protocols, // HTTP/1.1 only
	}
	return &Client{
		hc: &http.Client{
			Transport: tracing.Transport(tr), // a span per call, and its traceparent
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse
			},
		},
		timeout: o.Timeout,
		now:     o.Now,
		secrets: redact.New(o.Secrets...),
	}
}

// Now is the client's clock (Options.Now, or time.Now): the one the
// destinations built on it read for what they date.
func (c *Client) Now() time.Time { return c.now() }

// Request is one HTTP call.
type Request struct {
	Method string
	URL    *url.URL
	Header http.Header
	Body   []byte // nil for none
}

// Response is an answer, whatever its status.
type Response struct {
	Status     int
	Header     http.Header
	Body       []byte // at most 1 MiB of it
	RetryAfter time.Duration
}

// Do sends r once. Any HTTP answer comes back as a *Response with a nil
// error, whatever its status (see Classify). When no complete answer came,
// the error is a *delivery.SendError: NotCreated when the request was never
// wholly written, Unknown when it was.
//
// The credentials r carries in its credential headers (HeaderCredentials)
// and the client's Options.Secrets are scrubbed by value from every error
// text Do returns, as StatusError scrubs r's from its quote of an answer,
// so an adapter has nothing to remember for them. The body is returned as
// received, for the adapter to read: a text an adapter makes of it
// itself is scrubbed by the wrapper every destination gets at the
// composition root (delivery.Scrubbing).
func (c *Client) Do(ctx context.Context, r Request) (*Response, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	secrets := c.secrets.Add(HeaderCredentials(r.Header)...)

	var written atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err == nil {
				written.Store(true)
			}
		},
	})

	var body io.Reader
	if r.Body != nil {
		// A plain io.Reader: http.NewRequest sets no GetBody for it, so the
		// body cannot be rewound for a replay.
		body = struct{ io.Reader }{bytes.NewReader(r.Body)}
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, r.URL.String(), body)
	if err != nil {
		return nil, &delivery.SendError{Failure: delivery.NotCreated,
			Err: fmt.Errorf("%s %s: %s", r.Method, urls.Redacted(r.URL), secrets.Scrub(Scrub(cause(err).Error(), r.URL)))}
	}
	req.GetBody = nil
	req.ContentLength = int64(len(r.Body))
	for k, v := range r.Header {
		req.Header[k] = v
	}

	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, c.transportError(r, err, written.Load(), secrets)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		// The answer began, so the request was written and acted on: what
		// the helpdesk did is unknown.
		return nil, &delivery.SendError{Failure: delivery.Unknown, Status: resp.StatusCode,
			RetryAfter: RetryAfter(resp.Header, c.now()),
			Err:        fmt.Errorf("%s %s: reading the answer: %s", r.Method, urls.Redacted(r.URL), secrets.Scrub(Scrub(cause(err).Error(), r.URL)))}
	}
	return &Response{
		Status:     resp.StatusCode,
		Header:     resp.Header,
		Body:       data,
		RetryAfter: RetryAfter(resp.Header, c.now()),
	}, nil
}

func (c *Client) transportError(r Request, err error, written bool, secrets redact.Values) *delivery.SendError {
	outcome := delivery.NotCreated
	what := "request not sent"
	if written {
		outcome = delivery.Unknown
		what = "no answer"
	}
	msg := secrets.Scrub(Scrub(cause(err).Error(), r.URL))
	if errors.Is(err, context.DeadlineExceeded) {
		msg = fmt.Sprintf("timed out after %s", c.timeout)
	}
	return &delivery.SendError{Failure: outcome,
		Err: fmt.Errorf("%s %s: %s: %s", r.Method, urls.Redacted(r.URL), what, msg)}
}

// credentialHeaders are the request headers whose values are credentials.
var credentialHeaders = []string{"Authorization", "Proxy-Authorization", "Cookie", "X-Api-Key"}

// HeaderCredentials are the credentials h carries, each as an answer may
// quote it: a credential header's value (Authorization, Proxy-Authorization,
// Cookie, X-Api-Key), its part after the scheme ("Bearer <token>"), and
// for Basic the decoded user:password pair and the password (Zendesk's
// email/token:<token> and its token).
func HeaderCredentials(h http.Header) []string {
	var out []string
	for _, name := range credentialHeaders {
		for _, v := range h.Values(name) {
			out = append(out, v)
			scheme, rest, ok := strings.Cut(strings.TrimSpace(v), " ")
			if !ok {
				continue
			}
			rest = strings.TrimSpace(rest)
			out = append(out, rest)
			if strings.EqualFold(scheme, "Basic") {
				if pair, err := base64.StdEncoding.DecodeString(rest); err == nil {
					_, pass, _ := strings.Cut(string(pair), ":")
					out = append(out, string(pair), pass)
				}
			}
		}
	}
	return out
}

// cause strips a *url.Error, whose text names the whole URL (path and
// query included), and keeps what went wrong.
func cause(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// Scrub replaces in msg whatever of u could carry a secret (the whole URL,
// its path, query and user info) with the redacted URL or "*": a second
// guard, after cause, for an error text that quotes the URL some other way.
func Scrub(msg string, u *url.URL) string {
	if u == nil {
		return msg
	}
	red := urls.Redacted(u)
	for _, s := range []string{u.String(), u.Redacted()} {
		if s != "" {
			msg = strings.ReplaceAll(msg, s, red)
		}
	}
	parts := []string{u.RawQuery, u.Fragment, u.User.String(), strings.TrimPrefix(u.EscapedPath(), "/"), strings.TrimPrefix(u.Path, "/")}
	for p := range strings.SplitSeq(u.RawQuery, "&") {
		_, v, _ := strings.Cut(p, "=")
		parts = append(parts, p, v)
		if uv, err := url.QueryUnescape(v); err == nil {
			parts = append(parts, uv)
		}
	}
	for _, s := range parts {
		if len(s) > 1 {
			msg = strings.ReplaceAll(msg, s, "*")
		}
	}
	return msg
}

// Classify turns the answer to a create into a send error, nil for a 2xx.
// See the package documentation for the table; adapters refine it where
// their helpdesk says more (Zendesk's 400 IdempotentRequestError). A
// lookup's answers are the adapter's to read (404 there means absent).
func Classify(r Request, resp *Response) *delivery.SendError {
	s := resp.Status
	var o delivery.Failure
	switch {
	case s >= 200 && s < 300:
		return nil
	case s == http.StatusRequestTimeout, s == http.StatusTooManyRequests:
		o = delivery.NotCreated
	case s == http.StatusConflict:
		o = delivery.Unknown
	case s == http.StatusUnauthorized, s == http.StatusForbidden, s == http.StatusNotFound:
		// Our credentials, or the create URL itself, are wrong: nothing
		// about this ticket.
		o = delivery.Misconfigured
	case s >= 400 && s < 500:
		o = delivery.Refused
	default: // 1xx left over, 3xx, 5xx and anything unheard of
		o = delivery.Unknown
	}
	return StatusError(r, resp, o)
}

// LookupError is the error of a lookup's answer that is neither found nor
// absent (each adapter reads those itself): Misconfigured for 401 and 403,
// whose credentials are refused whatever the ticket, Unknown otherwise
// (429 and 503 with their Retry-After).
func LookupError(r Request, resp *Response) *delivery.SendError {
	o := delivery.Unknown
	if resp.Status == http.StatusUnauthorized || resp.Status == http.StatusForbidden {
		o = delivery.Misconfigured
	}
	return StatusError(r, resp, o)
}

// TicketBody is the body of t's create as encode writes it. A ticket
// without an id, which every create sends as its Idempotency-Key, and one
// that does not encode are refused: a *delivery.SendError whose text
// starts with adapter.
func TicketBody(adapter string, t delivery.HelpdeskTicket, encode func(delivery.HelpdeskTicket) ([]byte, error)) ([]byte, error) {
	if t.ID == "" {
		return nil, &delivery.SendError{Failure: delivery.Refused,
			Err: errors.New(adapter + ": ticket has no id to send as Idempotency-Key")}
	}
	b, err := encode(t)
	if err != nil {
		return nil, &delivery.SendError{Failure: delivery.Refused,
			Err: fmt.Errorf("%s: encoding the ticket: %v", adapter, err)}
	}
	return b, nil
}

// CheckLookupID refuses a lookup without an id, which no ticket has (Send
// refuses such a ticket through TicketBody): an error whose text starts
// with adapter, before anything is sent.
func CheckLookupID(adapter, id string) error {
	if id == "" {
		return errors.New(adapter + ": lookup without an id")
	}
	return nil
}

// StatusError is the send error of an answer with the given outcome. Its
// quote of the body is scrubbed of the URL's secrets and of r's header
// credentials (Do has scrubbed the body already; this covers an answer
// that did not come through Do).
func StatusError(r Request, resp *Response, o delivery.Failure) *delivery.SendError {
	quote := redact.New(HeaderCredentials(r.Header)...).Scrub(Scrub(Excerpt(resp.Body), r.URL))
	return &delivery.SendError{Failure: o, Status: resp.Status, RetryAfter: resp.RetryAfter,
		Err: fmt.Errorf("%s %s answered %d%s", r.Method, urls.Redacted(r.URL), resp.Status, quote)}
}

// Excerpt is a short single-line quote of an answer's body for an error
// text, "" for an empty body.
func Excerpt(body []byte) string {
	const limit = 200
	s := strings.TrimSpace(strings.ToValidUTF8(string(body), "\uFFFD"))
	if s == "" {
		return ""
	}
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > limit {
		cut := limit
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return ": " + s
}

// RetryAfter reads a Retry-After header, in seconds or as an HTTP-date
// measured from now. It is 0 when absent, unreadable or in the past.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if strings.Trim(v, "0123456789") == "" {
		secs, err := strconv.ParseUint(v, 10, 64)
		if err != nil || secs > uint64(math.MaxInt64/int64(time.Second)) {
			return time.Duration(math.MaxInt64) // all digits, beyond range
		}
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

// Settings is a destination's configuration as it is printed and logged,
// the one form every adapter's Config shows: "kind{url=... key=value ...
// timeout=...}" for fmt, and the same settings as a slog group led by
// "kind". The URL is shown redacted (urls.RedactedRaw); a credential goes
// in Attrs through Secret, so it shows only as set or not.
type Settings struct {
	Kind    string
	URL     string
	Attrs   []slog.Attr // the adapter's own settings, between url and timeout
	Timeout time.Duration
}

// Secret is the setting key with a credential's value shown as
// "[redacted]" when set and "" when not, so that a missing credential
// stays visible.
func Secret(key, value string) slog.Attr {
	if value == "" {
		return slog.String(key, "")
	}
	return slog.String(key, "[redacted]")
}

func (s Settings) attrs() []slog.Attr {
	return slices.Concat([]slog.Attr{slog.String("url", urls.RedactedRaw(s.URL))}, s.Attrs,
		[]slog.Attr{slog.Duration("timeout", s.Timeout)})
}

// String is "kind{url=... key=value ... timeout=...}", each value as fmt's
// %v prints it.
func (s Settings) String() string {
	var b strings.Builder
	b.WriteString(s.Kind + "{")
	for i, a := range s.attrs() {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(a.Key + "=" + a.Value.String())
	}
	b.WriteString("}")
	return b.String()
}

// LogValue is the settings as a group: kind, url, Attrs, timeout.
func (s Settings) LogValue() slog.Value {
	return slog.GroupValue(append([]slog.Attr{slog.String("kind", s.Kind)}, s.attrs()...)...)
}

// NewChecked is New for a destination's constructor, which refuses a
// negative timeout (zero means DefaultTimeout).
func NewChecked(o Options) (*Client, error) {
	if o.Timeout < 0 {
		return nil, fmt.Errorf("timeout %s is negative", o.Timeout)
	}
	return New(o), nil
}

// SettingError is a setting a destination's constructor refused. Field
// is the constructor's name for it ("url", "email", "token", "secret"),
// so that the composition root can name the setting as its configuration
// calls it; the text names the field already and never shows a
// credential.
type SettingError struct {
	Field string
	Err   error
}

func (e *SettingError) Error() string { return e.Err.Error() }
func (e *SettingError) Unwrap() error { return e.Err }

// Refused is the SettingError of field, with text.
func Refused(field, text string) *SettingError {
	return &SettingError{Field: field, Err: errors.New(text)}
}

// CheckURL parses a destination URL: absolute, https unless its host is a
// loopback address (localhost, 127.0.0.0/8, ::1) for local tests, and free
// of user info (credentials belong in the configuration's own fields). Its
// errors are SettingErrors of "url".
func CheckURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, Refused("url", "url: not a URL (it does not parse)")
	}
	if u.User != nil {
		return nil, Refused("url", "url: must not carry user info; put credentials in their own fields")
	}
	if u.Host == "" || u.Hostname() == "" {
		return nil, Refused("url", fmt.Sprintf("url: %q has no host", urls.Redacted(u)))
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, Refused("url", fmt.Sprintf("url: %q has a bad port", urls.Redacted(u)))
		}
	}
	if u.Fragment != "" {
		return nil, Refused("url", fmt.Sprintf("url: %q must not have a fragment", urls.Redacted(u)))
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
	case "http":
		if !urls.Loopback(u.Hostname()) {
			return nil, Refused("url", fmt.Sprintf("url: %q must be https (http is allowed only for loopback hosts)", urls.Redacted(u)))
		}
	default:
		return nil, Refused("url", fmt.Sprintf("url: %q must be https", urls.Redacted(u)))
	}
	return u, nil
}

// CheckBaseURL is CheckURL for a helpdesk's base URL, to which the
// adapter appends its API's paths: it must not have a query either.
func CheckBaseURL(raw string) (*url.URL, error) {
	u, err := CheckURL(raw)
	if err != nil {
		return nil, err
	}
	if u.RawQuery != "" || u.ForceQuery {
		return nil, Refused("url", fmt.Sprintf("url %q must not have a query", urls.Redacted(u)))
	}
	return u, nil
}
