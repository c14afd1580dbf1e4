package config

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Destination is the helpdesk tickets are delivered to: the config file's
// "delivery" block locally, the DELIVERY_* environment in Lambda. This
// package checks its shape (the kind, which fields belong to which kind,
// the bounds of the numbers); the URL and the credentials are checked by
// the destination's constructor (zendesk.New, webhook.New, linear.New), which runs at
// start, and Refused names the setting it refused.
type Destination struct {
	Kind        string        // "zendesk", "webhook" or "linear"
	URL         string        // https, or http for a loopback host; linear: "" is Linear's API
	Email       string        // zendesk: the agent the API token belongs to
	Token       string        // zendesk: the API token; never printed
	Secret      string        // webhook: the Standard Webhooks secret, whsec_ and base64; never printed
	Lookup      bool          // webhook: the endpoint answers lookups by idempotency key
	TeamID      string        // linear: the team the issues are created in
	APIKey      string        // linear: the personal API key (or OAuth token); never printed
	MaxAttempts int           // sends per ticket; 0: delivery.DefaultMaxAttempts
	Timeout     time.Duration // per helpdesk call; 0: the clients' default, delivery.DefaultCallTimeout
	// SweepConcurrency bounds the tickets the delivery function's
	// scheduled sweep delivers at once (DELIVERY_SWEEP_CONCURRENCY; not a
	// member of the config file); 0: deliverylambda.DefaultSweepConcurrency.
	SweepConcurrency int

	// env: read from the environment, where the credentials came from
	// secretFrom; otherwise from the config file.
	env        bool
	secretFrom string
}

// The destination kinds; DeliveryNone (or no kind at all) means tickets
// are not delivered.
const (
	DeliveryZendesk = "zendesk"
	DeliveryWebhook = "webhook"
	DeliveryLinear  = "linear"
	DeliveryNone    = "none"
)

// Delivery bounds.
const (
	MaxDeliveryAttempts = 100
	MinDeliveryTimeout  = 100 * time.Millisecond
	// MaxDeliveryTimeout keeps a lookup plus a send, each cut off at the
	// timeout, inside a lease well under a minute.
	MaxDeliveryTimeout          = 20 * time.Second
	MaxDeliverySweepConcurrency = 256
)

// Validate checks the destination's shape: kind zendesk, webhook or
// linear, the settings of that kind and none of the others', max_attempts 1..100
// and timeout 100ms..20s (zero: the default). Errors name the file's field
// and never show a credential. The URL and the credentials themselves are
// the constructor's to check (see Refused).
func (d Destination) Validate() error {
	linearSet := d.TeamID != "" || d.APIKey != ""
	switch d.Kind {
	case DeliveryZendesk:
		if d.Secret != "" || d.Lookup {
			return errors.New("config: delivery: secret and lookup are for kind webhook, not zendesk (zendesk is always looked up)")
		}
		if linearSet {
			return errors.New("config: delivery: team_id and api_key are for kind linear, not zendesk")
		}
	case DeliveryWebhook:
		if d.Email != "" || d.Token != "" {
			return errors.New("config: delivery: email and token are for kind zendesk, not webhook")
		}
		if linearSet {
			return errors.New("config: delivery: team_id and api_key are for kind linear, not webhook")
		}
	case DeliveryLinear:
		if d.Email != "" || d.Token != "" || d.Secret != "" || d.Lookup {
			return errors.New("config: delivery: email, token, secret and lookup are not for kind linear (it takes team_id and api_key)")
		}
	case "":
		return errors.New("config: delivery.kind: required, zendesk, webhook or linear")
	default:
		return fmt.Errorf("config: delivery.kind: %q is not zendesk, webhook or linear", d.Kind)
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
	return nil
}

// Refused is the one-line start error for a setting the destination's
// constructor refused: field is the constructor's name for it ("url",
// "email", "token", "secret", "team_id", "api_key"), and err, which already names the field in
// the constructor's words and shows no credential, says why. The error
// names the setting as this configuration calls it: delivery.url in the
// file; DELIVERY_URL or DELIVERY_TEAM_ID, or the credentials'
// DELIVERY_SECRET or DELIVERY_SECRET_PARAMETER, in the environment.
func (d Destination) Refused(field string, err error) error {
	if !d.env {
		return fmt.Errorf("config: delivery.%w", err)
	}
	name := "DELIVERY_" + strings.ToUpper(field)
	if field == "email" || field == "token" || field == "secret" || field == "api_key" {
		name = d.secretFrom
	}
	return fmt.Errorf("config: %s: %w", name, err)
}

// Credentials are every credential of the destination, whatever its
// kind, in each form a helpdesk may echo: the Zendesk token, its
// email/token:<token> pair and that pair's base64 (the Basic
// Authorization value, with and without "Basic "); the webhook secret,
// with and without its whsec_ prefix; the Linear key, as configured and
// trimmed. The composition root scrubs them by value from every error
// text and check line of the destination it builds. A credential field
// added to Destination belongs here (TestCredentialsCoverEveryField
// fails until it is listed, or named there as no credential).
func (d Destination) Credentials() []string {
	var out []string
	if d.Token != "" {
		pair := d.Email + "/token:" + d.Token
		basic := base64.StdEncoding.EncodeToString([]byte(pair))
		out = append(out, d.Token, pair, basic, "Basic "+basic)
	}
	if d.Secret != "" {
		out = append(out, d.Secret, strings.TrimPrefix(d.Secret, "whsec_"))
	}
	if d.APIKey != "" {
		out = append(out, d.APIKey, strings.TrimSpace(d.APIKey))
	}
	return out
}

// String shows the destination without its credentials; of the URL, only
// the host (a query or user part may hold a credential). The clients log
// their URL through urls.RedactedRaw.
func (d Destination) String() string {
	return fmt.Sprintf("delivery{kind=%s url=%s email=%s token=%s secret=%s lookup=%t team_id=%s api_key=%s max_attempts=%d timeout=%s}",
		d.Kind, origin(d.URL), d.Email, redacted(d.Token), redacted(d.Secret), d.Lookup, d.TeamID, redacted(d.APIKey), d.MaxAttempts, d.Timeout)
}

// GoString is String, so that %#v does not print credentials either.
func (d Destination) GoString() string { return d.String() }

// LogValue logs the destination without its credentials.
func (d Destination) LogValue() slog.Value {
	return slog.GroupValue(slog.String("kind", d.Kind), slog.String("url", origin(d.URL)),
		slog.Bool("lookup", d.Lookup), slog.String("team_id", d.TeamID), slog.Int("max_attempts", d.MaxAttempts), slog.Duration("timeout", d.Timeout))
}

// origin is the scheme and host of the URL raw, the redaction the
// contract gives URLs in logs (no user, path or query: a webhook's path
// can be its secret); "" when it has no host or does not parse.
func origin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// redacted shows a credential as "[redacted]" when set and "" when not,
// so that a missing one stays visible.
func redacted(s string) string {
	if s == "" {
		return ""
	}
	return "[redacted]"
}

// deliveryFile is the config file's "delivery" block.
type deliveryFile struct {
	Kind        string      `json:"kind"`
	URL         string      `json:"url"`
	Email       string      `json:"email"`
	Token       string      `json:"token"`
	Secret      string      `json:"secret"`
	Lookup      bool        `json:"lookup"`
	TeamID      string      `json:"team_id"`
	APIKey      string      `json:"api_key"`
	MaxAttempts json.Number `json:"max_attempts"`
	Timeout     string      `json:"timeout"`
}

// UnmarshalJSON reads the config file's "delivery" block:
// {"kind","url","email","token","secret","lookup","team_id","api_key","max_attempts","timeout"},
// timeout a Go duration such as "10s". Unknown fields are errors. Absent
// max_attempts and timeout are zero, the defaults; Validate checks the
// rest.
func (d *Destination) UnmarshalJSON(b []byte) error {
	var f deliveryFile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(&f); err != nil {
		return fmt.Errorf("delivery: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	out := Destination{Kind: f.Kind, URL: f.URL, Email: f.Email, Token: f.Token, Secret: f.Secret, Lookup: f.Lookup,
		TeamID: f.TeamID, APIKey: f.APIKey}
	var err error
	if out.MaxAttempts, err = integer(f.MaxAttempts.String(), 0, 1, MaxDeliveryAttempts); err != nil {
		return fmt.Errorf("delivery.max_attempts: %w", err)
	}
	if out.Timeout, err = duration(f.Timeout, 0); err != nil {
		return fmt.Errorf("delivery.timeout: %w", err)
	}
	*d = out
	return nil
}

// deliveryKind reads DELIVERY_KIND: whether it names a destination.
func deliveryKind(k string) (bool, error) {
	switch k {
	case "", DeliveryNone:
		return false, nil
	case DeliveryZendesk, DeliveryWebhook, DeliveryLinear:
		return true, nil
	default:
		return false, fmt.Errorf("%q is not zendesk, webhook, linear or none", k)
	}
}

// DeliveryLambda is the configuration of the deployed delivery function.
type DeliveryLambda struct {
	TableName        string
	MetricsNamespace string // "": metrics.DefaultNamespace
	// SecretParameter is DELIVERY_SECRET_PARAMETER, the SSM SecureString
	// holding the destination's credentials; it wins over DELIVERY_SECRET.
	// When set, Destination has no credentials until WithSecret is given
	// the parameter's value.
	SecretParameter string
	Destination     Destination
}

// DeliveryFromEnv reads the delivery function's configuration through
// getenv: TABLE_NAME, METRICS_NAMESPACE and the destination, DELIVERY_KIND,
// DELIVERY_URL, DELIVERY_TEAM_ID (linear), DELIVERY_SECRET_PARAMETER (its
// name; the composition root reads it) or DELIVERY_SECRET,
// DELIVERY_MAX_ATTEMPTS, DELIVERY_TIMEOUT, DELIVERY_LOOKUP,
// DELIVERY_SWEEP_CONCURRENCY (the scheduled sweep's sends at once). The
// secret is the JSON {"email","token"} (zendesk), {"secret"} (webhook) or
// {"api_key"} (linear). A DELIVERY_KIND that is empty or none is an error:
// the function would have nothing to deliver to.
func DeliveryFromEnv(getenv func(string) string) (DeliveryLambda, error) {
	c := DeliveryLambda{Destination: Destination{env: true}}
	if err := read(&c, deliverySettings, envSource(getenv)); err != nil {
		return c, err
	}
	if c.SecretParameter != "" {
		return c, nil // checked by WithSecret once the parameter is read
	}
	return c, c.Destination.Validate()
}

// deliverySettings are the delivery function's settings, read in this
// order: the kind decides what the secret must hold, and a parameter's
// name wins over DELIVERY_SECRET.
var deliverySettings = append(tableSettings(func(c *DeliveryLambda) (*string, *string) {
	return &c.TableName, &c.MetricsNamespace
}), []*setting[DeliveryLambda]{
	{key{env: "DELIVERY_KIND"}, func(c *DeliveryLambda, v string) error {
		ok, err := deliveryKind(v)
		if err == nil && !ok {
			err = errors.New("none or empty: this function has nothing to deliver to")
		}
		c.Destination.Kind = v
		return err
	}},
	{key{env: "DELIVERY_URL"}, func(c *DeliveryLambda, v string) error {
		c.Destination.URL = v
		return nil
	}},
	{key{env: "DELIVERY_TEAM_ID"}, func(c *DeliveryLambda, v string) error {
		c.Destination.TeamID = v
		return nil
	}},
	{key{env: "DELIVERY_MAX_ATTEMPTS"}, func(c *DeliveryLambda, v string) (err error) {
		c.Destination.MaxAttempts, err = integer(v, 0, 1, MaxDeliveryAttempts)
		return err
	}},
	{key{env: "DELIVERY_TIMEOUT"}, func(c *DeliveryLambda, v string) (err error) {
		c.Destination.Timeout, err = duration(v, 0)
		return err
	}},
	{key{env: "DELIVERY_SWEEP_CONCURRENCY"}, func(c *DeliveryLambda, v string) (err error) {
		c.Destination.SweepConcurrency, err = integer(v, 0, 1, MaxDeliverySweepConcurrency)
		return err
	}},
	{key{env: "DELIVERY_LOOKUP"}, func(c *DeliveryLambda, v string) (err error) {
		if v == "" {
			return nil
		}
		if c.Destination.Lookup, err = strconv.ParseBool(v); err != nil {
			return fmt.Errorf("%q is not true or false", v)
		}
		return nil
	}},
	{key{env: "DELIVERY_SECRET_PARAMETER"}, func(c *DeliveryLambda, v string) error {
		c.SecretParameter = v
		if v != "" {
			c.Destination.secretFrom = "DELIVERY_SECRET_PARAMETER " + v
		}
		return nil
	}},
	{key{env: "DELIVERY_SECRET"}, func(c *DeliveryLambda, v string) (err error) {
		if c.SecretParameter != "" {
			return nil // the composition root reads the parameter
		}
		c.Destination.secretFrom = "DELIVERY_SECRET"
		c.Destination, err = c.Destination.credentials(v)
		return err
	}},
}...)

// WithSecret is d with the credentials of secret, the JSON {"email","token"}
// (zendesk), {"secret"} (webhook) or {"api_key"} (linear) read from DELIVERY_SECRET or from the
// SSM parameter DELIVERY_SECRET_PARAMETER names. Its errors name that
// setting and never quote the secret: a JSON syntax error would show the
// character it stopped at.
func (d Destination) WithSecret(secret string) (Destination, error) {
	withCreds, err := d.credentials(secret)
	if err != nil {
		return d, fmt.Errorf("config: %s: %w", d.secretFrom, err)
	}
	return withCreds, withCreds.Validate()
}

// credentials is d with the credentials of secret; its errors do not name
// the setting, and never quote the secret.
func (d Destination) credentials(secret string) (Destination, error) {
	if secret == "" {
		return d, errors.New("required with DELIVERY_KIND " + d.Kind + " (or DELIVERY_SECRET_PARAMETER, naming an SSM SecureString)")
	}
	var c struct {
		Email  string `json:"email"`
		Token  string `json:"token"`
		Secret string `json:"secret"`
		APIKey string `json:"api_key"`
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(strings.TrimSpace(secret))))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil || dec.More() {
		return d, errors.New(`not a JSON object {"email","token"}, {"secret"} or {"api_key"} (value not shown)`)
	}
	switch d.Kind {
	case DeliveryZendesk:
		if c.Email == "" || c.Token == "" || c.Secret != "" || c.APIKey != "" {
			return d, errors.New(`zendesk needs the JSON {"email","token"} (value not shown)`)
		}
	case DeliveryWebhook:
		if c.Secret == "" || c.Email != "" || c.Token != "" || c.APIKey != "" {
			return d, errors.New(`webhook needs the JSON {"secret"} (value not shown)`)
		}
	case DeliveryLinear:
		if c.APIKey == "" || c.Email != "" || c.Token != "" || c.Secret != "" {
			return d, errors.New(`linear needs the JSON {"api_key"} (value not shown)`)
		}
	}
	d.Email, d.Token, d.Secret, d.APIKey = c.Email, c.Token, c.Secret, c.APIKey
	return d, nil
}
