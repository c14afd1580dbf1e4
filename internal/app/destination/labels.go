package destination

import (
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/metrics"
)

// MetricLabels is the state label's closed set, given to the recorder by
// both programs that deliver (the delivery function and the local
// server): the engine's step results, in their order.
func MetricLabels() metrics.DeliveryLabels {
	return metrics.DeliveryLabels{States: metrics.Names(delivery.Results), Delivered: string(delivery.ResultDelivered),
		Kinds: []string{delivery.KindTicket, core.KindComment, core.KindClose}}
}
