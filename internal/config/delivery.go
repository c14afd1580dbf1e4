package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/helpdesk/httpsend"
	"github.com/aivax-examples/idempotent-callback/internal/helpdesk/webhook"
)

// Delivery is the destination tickets are delivered to: the config file's
// "delivery" block locally, the DELIVERY_* environment in Lambda.
type Delivery struct {
	Kind        string        // "zendesk" or "webhook"
	URL         string        // https, or http for a loopback host
	Email       string        // zendesk: the agent the API token belongs to
	Token       string        // zendesk: the API token; never printed
	Secret      string        // webhook: the Standard Webhooks secret, whsec_ and base64; never printed
	Lookup      bool          // webhook: the endpoint answers lookups by idempotency key
	MaxAttempts int           // sends per ticket; 0 means DefaultDeliveryMaxAttempts
	Timeout     time.Duration // per helpdesk call; 0 means DefaultDeliveryTimeout
	// SweepConcurrency bounds the tickets the delivery function's
	// scheduled sweep delivers at once (DELIVERY_SWEEP_CONCURRENCY; not a
	// member of the config file); 0 means DefaultDeliverySweepConcurrency.
	SweepConcurrency int
}

// The destination kinds; DeliveryNone (or no kind at all) means tickets
// are not delivered.
const (
	DeliveryZendesk = "zendesk"
	DeliveryWebhook = "webhook"
	DeliveryNone    = "none"
)

// Delivery defaults and bounds.
const (
	DefaultDeliveryMaxAttempts = 8
	MaxDeliveryAttempts        = 100
	DefaultDeliveryTimeout     = httpsend.DefaultTimeout
	MinDeliveryTimeout         = 100 * time.Millisecond
	// MaxDeliveryTimeout keeps a lookup plus a send, each cut off at the
	// timeout, inside a lease well under a minute.
	MaxDeliveryTimeout = 20 * time.Second
	// DefaultDeliverySweepConcurrency: 32 sends in flight drain about 1,300
	// tickets a minute from a helpdesk answering in 1.5 s, several times a
	// realistic backlog, while a fast helpdesk's rate limit (answered 429
	// with Retry-After, which the engine honours) rather than the sweep
	// sets the pace, and the claims and records stay far below what the
	// one partition of the delivery-due index takes (1,000 writes a second).
	DefaultDeliverySweepConcurrency = 32
	MaxDeliverySweepConcurrency     = 256
)

// Validate checks the destination: kind zendesk or webhook, an https URL
// (http only for loopback hosts), the credentials the kind needs and none
// of the other kind's (a webhook secret that webhook.DecodeSecret reads), max_attempts 1..100 and timeout 100ms..20s (zero:
// the default). Errors name the file's field and never show a credential.
func (d Delivery) Validate() error {
	switch d.Kind {
	case DeliveryZendesk:
		if strings.TrimSpace(d.Email) == "" || d.Token == "" {
			return errors.New("config: delivery: kind zendesk needs email and token")
		}
		if d.Secret != "" || d.Lookup {
			return errors.New("config: delivery: secret and lookup are for kind webhook, not zendesk (zendesk is always looked up)")
		}
	case DeliveryWebhook:
		if d.Secret == "" {
			return errors.New("config: delivery: kind webhook needs secret")
		}
		if d.Email != "" || d.Token != "" {
			return errors.New("config: delivery: email and token are for kind zendesk, not webhook")
		}
	case "":
		return errors.New("config: delivery.kind: required, zendesk or webhook")
	default:
		return fmt.Errorf("config: delivery.kind: %q is neither zendesk nor webhook", d.Kind)
	}
	if err := checkDeliveryURL(d.URL); err != nil {
		return err
	}
	if d.MaxAttempts != 0 && (d.MaxAttempts < 1 || d.MaxAttempts > MaxDeliveryAttempts) {
		return fmt.Errorf("config: delivery.max_attempts: %d is not from 1 to %d", d.MaxAttempts, MaxDeliveryAttempts)
	}
	if d.Timeout != 0 && (d.Timeout < MinDeliveryTimeout || d.Timeout > MaxDeliveryTimeout) {
		return fmt.Errorf("config: delivery.timeout: %s is not from %s to %s", d.Timeout, MinDeliveryTimeout, MaxDeliveryTimeout)
	}
	if d.SweepConcurrency != 0 && (d.SweepConcurrency < 1 || d.SweepConcurrency > MaxDeliverySweepConcurrency) {
		return fmt.Errorf("config: DELIVERY_SWEEP_CONCURRENCY: %d is not from 1 to %d", d.SweepConcurrency, MaxDeliverySweepConcurrency)
	}
	if d.Kind == DeliveryWebhook {
		if _, err := webhook.DecodeSecret(d.Secret); err != nil {
			return fmt.Errorf("config: delivery.secret: %w", err)
		}
	}
	return nil
}

// checkDeliveryURL holds the URL to the rules the helpdesk client itself
// enforces (httpsend.CheckURL), so a URL the client would refuse stops the
// program at start.
func checkDeliveryURL(raw string) error {
	if raw == "" {
		return errors.New("config: delivery.url: required")
	}
	if _, err := httpsend.CheckURL(raw); err != nil {
		return fmt.Errorf("config: delivery.%w", err)
	}
	return nil
}

// String shows the destination without its credentials.
func (d Delivery) String() string {
	return fmt.Sprintf("delivery{kind=%s url=%s email=%s token=%s secret=%s lookup=%t max_attempts=%d timeout=%s}",
		d.Kind, httpsend.RedactRaw(d.URL), d.Email, httpsend.Redacted(d.Token), httpsend.Redacted(d.Secret), d.Lookup, d.MaxAttempts, d.Timeout)
}

// GoString is String, so that %#v does not print credentials either.
func (d Delivery) GoString() string { return d.String() }

// LogValue logs the destination without its credentials.
func (d Delivery) LogValue() slog.Value {
	return slog.GroupValue(slog.String("kind", d.Kind), slog.String("url", httpsend.RedactRaw(d.URL)),
		slog.Bool("lookup", d.Lookup), slog.Int("max_attempts", d.MaxAttempts), slog.Duration("timeout", d.Timeout))
}

// deliveryFile is the config file's "delivery" block.
type deliveryFile struct {
	Kind        string      `json:"kind"`
	URL         string      `json:"url"`
	Email       string      `json:"email"`
	Token       string      `json:"token"`
	Secret      string      `json:"secret"`
	Lookup      bool        `json:"lookup"`
	MaxAttempts json.Number `json:"max_attempts"`
	Timeout     string      `json:"timeout"`
}

// UnmarshalJSON reads the config file's "delivery" block:
// {"kind","url","email","token","secret","lookup","max_attempts","timeout"},
// timeout a Go duration such as "10s". Unknown fields are errors. Absent
// max_attempts and timeout take their defaults; Validate checks the rest.
func (d *Delivery) UnmarshalJSON(b []byte) error {
	var f deliveryFile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(&f); err != nil {
		return fmt.Errorf("delivery: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	out := Delivery{Kind: f.Kind, URL: f.URL, Email: f.Email, Token: f.Token, Secret: f.Secret, Lookup: f.Lookup}
	var err error
	if out.MaxAttempts, err = integer(f.MaxAttempts.String(), DefaultDeliveryMaxAttempts, 1, MaxDeliveryAttempts); err != nil {
		return fmt.Errorf("delivery.max_attempts: %w", err)
	}
	if out.Timeout, err = duration(f.Timeout, DefaultDeliveryTimeout); err != nil {
		return fmt.Errorf("delivery.timeout: %w", err)
	}
	*d = out
	return nil
}

// DeliveryKindFromEnv reads DELIVERY_KIND alone, for the callback
// function: it only needs to know whether new tickets are written pending.
func DeliveryKindFromEnv(getenv func(string) string) (deliver bool, err error) {
	switch k := getenv("DELIVERY_KIND"); k {
	case "", DeliveryNone:
		return false, nil
	case DeliveryZendesk, DeliveryWebhook:
		return true, nil
	default:
		return false, fmt.Errorf("config: DELIVERY_KIND: %q is not zendesk, webhook or none", k)
	}
}

// DeliveryFromEnv reads the delivery function's destination: DELIVERY_KIND,
// DELIVERY_URL, DELIVERY_SECRET_PARAMETER (read through readParameter, an
// SSM SecureString) or DELIVERY_SECRET (the parameter wins when both are
// set), DELIVERY_MAX_ATTEMPTS, DELIVERY_TIMEOUT, DELIVERY_LOOKUP,
// DELIVERY_SWEEP_CONCURRENCY (the scheduled sweep's sends at once). The
// secret is the JSON {"email","token"} (zendesk) or {"secret"} (webhook).
// ok is false when DELIVERY_KIND is empty or none: nothing to deliver to.
func DeliveryFromEnv(getenv func(string) string, readParameter func(name string) (string, error)) (d Delivery, ok bool, err error) {
	if ok, err = DeliveryKindFromEnv(getenv); !ok || err != nil {
		return d, ok, err
	}
	d = Delivery{Kind: getenv("DELIVERY_KIND"), URL: getenv("DELIVERY_URL")}
	if d.URL == "" {
		return d, false, errors.New("config: DELIVERY_URL is required with DELIVERY_KIND " + d.Kind)
	}
	secret, from := getenv("DELIVERY_SECRET"), "DELIVERY_SECRET"
	if name := getenv("DELIVERY_SECRET_PARAMETER"); name != "" {
		if readParameter == nil {
			return d, false, errors.New("config: DELIVERY_SECRET_PARAMETER is set but no parameter reader was given")
		}
		if secret, err = readParameter(name); err != nil {
			return d, false, fmt.Errorf("config: DELIVERY_SECRET_PARAMETER %s: %w", name, err)
		}
		from = "DELIVERY_SECRET_PARAMETER " + name
	}
	if secret == "" {
		return d, false, errors.New("config: DELIVERY_SECRET_PARAMETER (or DELIVERY_SECRET) is required with DELIVERY_KIND " + d.Kind)
	}
	if err := d.setCredentials(secret); err != nil {
		return d, false, fmt.Errorf("config: %s: %w", from, err)
	}
	if d.MaxAttempts, err = integer(getenv("DELIVERY_MAX_ATTEMPTS"), DefaultDeliveryMaxAttempts, 1, MaxDeliveryAttempts); err != nil {
		return d, false, fmt.Errorf("config: DELIVERY_MAX_ATTEMPTS: %w", err)
	}
	if d.Timeout, err = duration(getenv("DELIVERY_TIMEOUT"), DefaultDeliveryTimeout); err != nil {
		return d, false, fmt.Errorf("config: DELIVERY_TIMEOUT: %w", err)
	}
	if d.SweepConcurrency, err = integer(getenv("DELIVERY_SWEEP_CONCURRENCY"), DefaultDeliverySweepConcurrency, 1, MaxDeliverySweepConcurrency); err != nil {
		return d, false, fmt.Errorf("config: DELIVERY_SWEEP_CONCURRENCY: %w", err)
	}
	if v := getenv("DELIVERY_LOOKUP"); v != "" {
		if d.Lookup, err = strconv.ParseBool(v); err != nil {
			return d, false, fmt.Errorf("config: DELIVERY_LOOKUP: %q is not true or false", v)
		}
	}
	if err := d.Validate(); err != nil {
		return d, false, err
	}
	return d, true, nil
}

// setCredentials reads the secret JSON into d. Its errors never quote the
// secret: a JSON syntax error would show the character it stopped at.
func (d *Delivery) setCredentials(secret string) error {
	var c struct {
		Email  string `json:"email"`
		Token  string `json:"token"`
		Secret string `json:"secret"`
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(strings.TrimSpace(secret))))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil || dec.More() {
		return errors.New(`not a JSON object {"email","token"} or {"secret"} (value not shown)`)
	}
	switch d.Kind {
	case DeliveryZendesk:
		if c.Email == "" || c.Token == "" || c.Secret != "" {
			return errors.New(`zendesk needs the JSON {"email","token"} (value not shown)`)
		}
	case DeliveryWebhook:
		if c.Secret == "" || c.Email != "" || c.Token != "" {
			return errors.New(`webhook needs the JSON {"secret"} (value not shown)`)
		}
	}
	d.Email, d.Token, d.Secret = c.Email, c.Token, c.Secret
	return nil
}
