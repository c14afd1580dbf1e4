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
// (Steady), a burst committed at once (Burst), and tickets each followed
// by a comment and a close (FollowUps).
type StreamLambda struct {
	Steady    DeliveryBench
	Burst     BurstBench
	FollowUps FollowUpBench
}

// BenchmarkDeliveryStreamFollowUps, functions/delivery: its file, name and
// units, and the goal the report checks.
const (
	FileDeliveryStreamFollowUps = "delivery-stream-followups.json"
	deliveryFollowUpsBench      = "BenchmarkDeliveryStreamFollowUps"
	unitThreads                 = "threads/s"
	unitHelpdeskCallsPerRecord  = "helpdesk-calls/record"
	unitLateFollowUps           = "late-followups"
	// goalFollowUpP50ms: a follow-up's p50 from its ticket's delivery to
	// its own, at most this many ms.
	goalFollowUpP50ms = 1000
)

// FollowUpBench is BenchmarkDeliveryStreamFollowUps: threads of a ticket,
// its comment and its close committed back to back and delivered through
// the stream under Lambda's polling.
type FollowUpBench struct {
	Threads    int  // threads per run (the benchmark's iterations)
	PerSecond  Stat // threads delivered per second
	Comment    FollowUpLatency
	Close      FollowUpLatency
	TicketP50  Stat // the ticket, from its commit to its delivery
	TicketP99  Stat
	Calls      Stat // helpdesk requests per record (three a thread)
	Late       Stat // follow-ups committed after their ticket's delivery, per run
	GoalP50ms  float64
	CommentMet bool // the comment's p50 is within GoalP50ms
	CloseMet   bool
}

// FollowUpLatency is a follow-up's time from its ticket's delivered record
// to its own.
type FollowUpLatency struct {
	P50ms, P99ms Stat
}

// loadFollowUps reads BenchmarkDeliveryStreamFollowUps.
func (rp *Report) loadFollowUps(dir string) error {
	run, err := readTestJSON(filepath.Join(dir, FileDeliveryStreamFollowUps))
	if err != nil {
		return err
	}
	f, err := run.followUps(deliveryFollowUpsBench)
	if err != nil {
		return fmt.Errorf("%s: %w", FileDeliveryStreamFollowUps, err)
	}
	rp.Delivery.StreamLambda.FollowUps = f
	return nil
}

// followUps summarizes the follow-up benchmark bench; every run must have
// delivered the same number of threads.
func (r *testRun) followUps(bench string) (FollowUpBench, error) {
	f := FollowUpBench{GoalP50ms: goalFollowUpP50ms}
	for _, res := range r.Results {
		if baseName(res) != bench {
			continue
		}
		if f.Threads != 0 && res.Iters != f.Threads {
			return f, fmt.Errorf("%s: runs of %d and %d threads; want one -benchtime Nx", bench, f.Threads, res.Iters)
		}
		f.Threads = res.Iters
	}
	var err error
	for _, u := range []struct {
		unit string
		into *Stat
	}{
		{unitThreads, &f.PerSecond}, {"comment-" + unitP50, &f.Comment.P50ms}, {"comment-" + unitP99, &f.Comment.P99ms},
		{"close-" + unitP50, &f.Close.P50ms}, {"close-" + unitP99, &f.Close.P99ms},
		{"ticket-" + unitP50, &f.TicketP50}, {"ticket-" + unitP99, &f.TicketP99},
		{unitHelpdeskCallsPerRecord, &f.Calls}, {unitLateFollowUps, &f.Late},
	} {
		if *u.into, err = r.stat(bench, u.unit); err != nil {
			return f, err
		}
	}
	f.CommentMet = f.Comment.P50ms.Center <= f.GoalP50ms
	f.CloseMet = f.Close.P50ms.Center <= f.GoalP50ms
	return f, nil
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
