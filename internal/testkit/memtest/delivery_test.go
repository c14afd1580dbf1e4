package memtest_test

import (
	"testing"

	"github.com/aivax-examples/idempotent-callback/internal/testkit/deliverytest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/memtest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/storetest"
)

func TestDeliveryConformance(t *testing.T) {
	deliverytest.Run(t, deliverytest.Harness{
		Open: func(*testing.T) deliverytest.Adapter { return memtest.New() },
	})
}

func TestSettleStale(t *testing.T) { storetest.CheckSettleStale(t, memtest.New()) }
