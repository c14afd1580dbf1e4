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
)

// Delivery is the helpdesk destination new tickets are delivered to: the
// config file's "delivery" block locally, the DELIVERY_* variables in
// Lambda. Zero MaxAttempts and Timeout mean their defaults.
type Delivery struct {
	Kind, URL, Email, Token, Secret string
	Lookup                          bool
	MaxAttempts                     int
	Timeout                         time.Duration
}

// Delivery defaults and bounds.
const (
	DefaultDeliveryMaxAttempts = 8
	MaxDeliveryAttempts        = 100
	DefaultDeliveryTimeout     = 10 * time.Second
	// MaxDeliveryTimeout keeps a lookup plus a send, each cut off at the
	// timeout, inside one delivery lease (under a minute).
	MaxDeliveryTimeout = 20 * time.Second
)

// The destination kinds; DeliveryNone (or no kind at all) means tickets
// are not delivered.
const (
	DeliveryZendesk = "zendesk"
	DeliveryWebhook = "webhook"
	DeliveryNone    = "none"
)

// Validate checks d: the kind, an https URL (http only for loopback
// hosts), the credentials the kind needs, and the bounds of max_attempts
// and timeout. Errors name the field and never carry a credential.
func (d Delivery) Validate() error {
	switch d.Kind {
	case DeliveryZendesk:
		if d.Email == "" || d.Token == "" {
			return errors.New("config: delivery: zendesk needs email and token")
		}
		if d.Secret != "" {
			return errors.New("config: delivery: secret is for webhook, not zendesk")
		}
		if d.Lookup {
			return errors.New("config: delivery: lookup is for webhook; zendesk is always looked up by external_id")
		}
	case DeliveryWebhook:
		if d.Secret == "" {
			return errors.New("config: delivery: webhook needs secret")
		}
		if d.Email != "" || d.Token != "" {
			return errors.New("config: delivery: email and token are for zendesk, not webhook")
		}
	default:
		return fmt.Errorf("config: delivery: kind: %q is neither zendesk nor webhook", d.Kind)
	}
	if _, err := httpsend.CheckURL(d.URL); err != nil {
		return fmt.Errorf("config: delivery: %w", err)
	}
	if d.MaxAttempts != 0 && (d.MaxAttempts < 1 || d.MaxAttempts > MaxDeliveryAttempts) {
		return fmt.Errorf("config: delivery: max_attempts: %d is not from 1 to %d", d.MaxAttempts, MaxDeliveryAttempts)
	}
	if d.Timeout < 0 || d.Timeout > MaxDeliveryTimeout {
		return fmt.Errorf("config: delivery: timeout: %s is negative or above %s", d.Timeout, MaxDeliveryTimeout)
	}
	return nil
}

// String shows d without its credentials.
func (d Delivery) String() string {
	return fmt.Sprintf("delivery{kind=%s url=%s email=%s token=%s secret=%s lookup=%t max_attempts=%d timeout=%s}",
		d.Kind, redactedURL(d.URL), d.Email, set(d.Token), set(d.Secret), d.Lookup, d.MaxAttempts, d.Timeout)
}

// GoString is String, so that %#v does not print credentials either.
func (d Delivery) GoString() string { return d.String() }

// LogValue logs d without its credentials.
func (d Delivery) LogValue() slog.Value {
	return slog.GroupValue(slog.String("kind", d.Kind), slog.String("url", redactedURL(d.URL)),
		slog.Bool("lookup", d.Lookup), slog.Int("max_attempts", d.MaxAttempts), slog.Duration("timeout", d.Timeout))
}

func set(s string) string {
	if s == "" {
		return ""
	}
	return "[redacted]"
}

// redactedURL drops a URL's query, where a webhook may carry a token.
func redactedURL(u string) string {
	if i := strings.IndexAny(u, "?#"); i >= 0 {
		return u[:i] + "?[redacted]"
	}
	return u
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
// set), DELIVERY_MAX_ATTEMPTS, DELIVERY_TIMEOUT, DELIVERY_LOOKUP. The
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
