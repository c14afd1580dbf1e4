// Package destination builds the helpdesk client a delivery block or the
// delivery function's environment names: the one place that knows every
// kind. Only the programs that deliver import it (the delivery function,
// the local server, the operator's check), so the callback function links
// no helpdesk client.
package destination

import (
	"errors"
	"fmt"

	"github.com/aivax-examples/idempotent-callback/internal/config"
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/helpdesk/httpsend"
	"github.com/aivax-examples/idempotent-callback/internal/helpdesk/linear"
	"github.com/aivax-examples/idempotent-callback/internal/helpdesk/webhook"
	"github.com/aivax-examples/idempotent-callback/internal/helpdesk/zendesk"
)

// New checks d and builds the destination it names. The URL and
// credential rules are the constructors'; a setting they refuse stops the
// program at start with one line naming it as the configuration does
// (config.Destination.Refused). A zero timeout is the clients' own
// default. Every destination built is wrapped in delivery.Scrubbing with
// all of d's credentials (config.Destination.Credentials), whatever its
// kind: no error text, log line, stored delivery_error or check line
// carries one, even when the helpdesk echoes it.
func New(d config.Destination) (delivery.Destination, error) {
	dst, err := build(d)
	if err != nil {
		return nil, err
	}
	return delivery.Scrubbing(dst, d.Credentials()...), nil
}

// build is the client d names, unwrapped.
func build(d config.Destination) (delivery.Destination, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	// A failed constructor's nil client must not become a non-nil
	// Destination, hence the explicit checks.
	switch d.Kind {
	case config.DeliveryZendesk:
		c, err := zendesk.New(zendesk.Config{URL: d.URL, Email: d.Email, Token: d.Token, Timeout: d.Timeout})
		if err != nil {
			return nil, refused(d, err)
		}
		return c, nil
	case config.DeliveryWebhook:
		c, err := webhook.New(webhook.Config{URL: d.URL, Secret: d.Secret, Lookup: d.Lookup, Timeout: d.Timeout})
		if err != nil {
			return nil, refused(d, err)
		}
		return c, nil
	case config.DeliveryLinear:
		c, err := linear.New(linear.Config{URL: d.URL, TeamID: d.TeamID, APIKey: d.APIKey, Timeout: d.Timeout})
		if err != nil {
			return nil, refused(d, err)
		}
		return c, nil
	}
	// Which kinds exist is config's to say (Validate above); a kind it
	// accepts that has no client here is a wiring fault, not bad input.
	return nil, fmt.Errorf("destination: kind %q has no client", d.Kind)
}

// refused names the setting behind a constructor's error.
func refused(d config.Destination, err error) error {
	var se *httpsend.SettingError
	if errors.As(err, &se) {
		return d.Refused(se.Field, se)
	}
	return fmt.Errorf("config: delivery: %w", err)
}

// Engine is the delivery engine's settings for d, the one literal both
// delivering programs start from: zero max_attempts and timeout are the
// engine's and the clients' defaults. The caller adds the store, the
// destination and its observer where it has them.
func Engine(d config.Destination) delivery.Engine {
	return delivery.Engine{MaxAttempts: d.MaxAttempts, Lease: delivery.LeaseFor(d.Timeout), CallTimeout: d.Timeout}
}
