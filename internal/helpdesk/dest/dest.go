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
// config.DefaultDeliveryTimeout, which is the clients' own default.
func New(cfg config.Delivery) (delivery.Destination, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// A failed constructor's nil client must not become a non-nil
	// Destination, hence the explicit checks.
	switch cfg.Kind {
	case config.DeliveryZendesk:
		c, err := zendesk.New(zendesk.Config{URL: cfg.URL, Email: cfg.Email, Token: cfg.Token, Timeout: cfg.Timeout})
		if err != nil {
			return nil, err
		}
		return c, nil
	case config.DeliveryWebhook:
		c, err := webhook.New(webhook.Config{URL: cfg.URL, Secret: cfg.Secret, Lookup: cfg.Lookup, Timeout: cfg.Timeout})
		if err != nil {
			return nil, err
		}
		return c, nil
	}
	return nil, fmt.Errorf("config: delivery: kind: %q is neither zendesk nor webhook", cfg.Kind)
}
