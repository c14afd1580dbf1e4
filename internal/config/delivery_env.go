package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// The destination kinds; DeliveryNone (or no kind at all) means tickets
// are not delivered.
const (
	DeliveryZendesk = "zendesk"
	DeliveryWebhook = "webhook"
	DeliveryNone    = "none"
)

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
