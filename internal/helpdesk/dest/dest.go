// Package dest builds the helpdesk destination a delivery configuration
// names: the one place that knows every kind.
package dest

import (
	"fmt"

	"github.com/aivax-examples/idempotent-callback/internal/config"
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/helpdesk/webhook"
	"github.com/aivax-examples/idempotent-callback/internal/helpdesk/zendesk"
)

// New checks cfg and returns its destination. A zero timeout is
// config.DefaultDeliveryTimeout.
func New(cfg config.Delivery) (delivery.Destination, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = config.DefaultDeliveryTimeout
	}
	// A failed constructor's nil client must not become a non-nil
	// Destination, hence the explicit checks.
	switch cfg.Kind {
	case config.DeliveryZendesk:
		c, err := zendesk.New(zendesk.Config{URL: cfg.URL, Email: cfg.Email, Token: cfg.Token, Timeout: timeout})
		if err != nil {
			return nil, err
		}
		return c, nil
	case config.DeliveryWebhook:
		c, err := webhook.New(webhook.Config{URL: cfg.URL, Secret: cfg.Secret, Lookup: cfg.Lookup, Timeout: timeout})
		if err != nil {
			return nil, err
		}
		return c, nil
	}
	return nil, fmt.Errorf("config: delivery: kind: %q is neither zendesk nor webhook", cfg.Kind)
}
