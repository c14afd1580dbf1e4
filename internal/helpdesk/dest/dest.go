// Package dest builds the configured helpdesk destination: the one place
// that knows which adapter a config.Delivery's kind names.
package dest

import (
	"fmt"

	"github.com/aivax-examples/idempotent-callback/internal/config"
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/helpdesk/webhook"
	"github.com/aivax-examples/idempotent-callback/internal/helpdesk/zendesk"
)

// New checks cfg and returns its destination: a Zendesk client or a signed
// webhook, each with cfg's per-call timeout (the adapters' default, 10 s,
// when zero).
func New(cfg config.Delivery) (delivery.Destination, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	switch cfg.Kind {
	case "zendesk":
		return zendesk.New(zendesk.Config{URL: cfg.URL, Email: cfg.Email, Token: cfg.Token, Timeout: cfg.Timeout})
	case "webhook":
		return webhook.New(webhook.Config{URL: cfg.URL, Secret: cfg.Secret, Lookup: cfg.Lookup, Timeout: cfg.Timeout})
	}
	return nil, fmt.Errorf("config: delivery.kind: %q is neither zendesk nor webhook", cfg.Kind)
}
