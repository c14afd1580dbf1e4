package report

import (
	"fmt"
	"path/filepath"
)

// Files and names of the stream path under Lambda's polling
// (functions/delivery).
const (
	FileDeliveryStreamLambda  = "delivery-stream-lambda.json" // BenchmarkDeliveryStreamLambda
	FileDeliveryStreamBurst   = "delivery-stream-burst.json"  // BenchmarkDeliveryStreamBurst
	deliveryStreamLambdaBench = "BenchmarkDeliveryStreamLambda"
	deliveryStreamBurstBench  = "BenchmarkDeliveryStreamBurst"
	unitDrainSeconds          = "drain-s"
	unitCommitSeconds         = "commit-s"
	unitBurstTickets          = "tickets/burst"
)

// StreamLambda is the stream path as a deployed stack sees it: the event
// source mapping's polling modelled, callbacks committed back to back
// (Steady), and a burst committed at once (Burst).
type StreamLambda struct {
	Steady DeliveryBench
	Burst  BurstBench
}

// BurstBench is one burst of tickets committed at once and drained
// through the stream.
type BurstBench struct {
	DeliveryBench
	Drain  Stat // seconds from the first commit to the last ticket delivered
	Commit Stat // seconds the commits themselves took
}

// loadStreamLambda reads the two benchmarks of the stream path under
// Lambda's polling.
func (rp *Report) loadStreamLambda(dir string) error {
	run, err := readTestJSON(filepath.Join(dir, FileDeliveryStreamLambda))
	if err != nil {
		return err
	}
	if rp.Delivery.StreamLambda.Steady, err = run.delivery(deliveryStreamLambdaBench, "stream path, Lambda's polling modelled"); err != nil {
		return fmt.Errorf("%s: %w", FileDeliveryStreamLambda, err)
	}
	burst, err := readTestJSON(filepath.Join(dir, FileDeliveryStreamBurst))
	if err != nil {
		return err
	}
	b := BurstBench{}
	if b.DeliveryBench, err = burst.delivery(deliveryStreamBurstBench, "burst"); err != nil {
		return fmt.Errorf("%s: %w", FileDeliveryStreamBurst, err)
	}
	tickets, err := burst.stat(deliveryStreamBurstBench, unitBurstTickets)
	if err != nil {
		return fmt.Errorf("%s: %w", FileDeliveryStreamBurst, err)
	}
	b.Tickets = int(tickets.Center)
	for _, u := range []struct {
		unit string
		into *Stat
	}{{unitDrainSeconds, &b.Drain}, {unitCommitSeconds, &b.Commit}} {
		if *u.into, err = burst.stat(deliveryStreamBurstBench, u.unit); err != nil {
			return fmt.Errorf("%s: %w", FileDeliveryStreamBurst, err)
		}
	}
	rp.Delivery.StreamLambda.Burst = b
	return nil
}
