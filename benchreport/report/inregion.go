package report

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/aivax-examples/idempotent-callback/internal/bench/results"
)

// FileInRegion is results.InRegion from TestInRegion, internal/bench.
const FileInRegion = "inregion.json"

// Hops of results.InRegion, and the goals the report checks.
const (
	hopLocal = "local"
	hopModel = "model"
	// goalRepeatOverRead: a repeat's p50 at most this many times one bare
	// read's p50 under the same hop.
	goalRepeatOverRead = 1.2
	// goalNewOverTransact: a new operation's p50 at most this many times
	// one bare transaction's p50 under the same hop.
	goalNewOverTransact = 1.05
)

// inRegionKinds are the cases every hop must have, in the order the
// tables show them.
var inRegionKinds = []string{
	results.InRegionNew, results.InRegionNewParallel, results.InRegionRepeat, results.InRegionRepeatCached,
	results.InRegionGet, results.InRegionPut, results.InRegionTransact, results.InRegionThreeWrites,
}

// followUpKinds are the follow-up cases every hop must have, in the order
// their table shows them: each without a destination, then with one.
var followUpKinds = func() []string {
	var out []string
	for _, suffix := range []string{"", results.InRegionWithDestination} {
		for _, k := range []string{results.InRegionCommentNew, results.InRegionCommentRepeat, results.InRegionCloseNew, results.InRegionCloseRepeat} {
			out = append(out, k+suffix)
		}
	}
	return out
}()

// InRegionReport is what the report shows of TestInRegion.
type InRegionReport struct {
	results.InRegion
	LocalName, ModelName string
	// Rows pair each case on DynamoDB Local alone and under the model.
	Rows []InRegionRow
	// FollowUps are the add_comment and close_ticket cases, paired as Rows.
	FollowUps []InRegionRow
	// Goals are the two ratios the design aims at, on each hop.
	Goals []Goal
	// Disagreed lists where DynamoDB Local reported another capacity than
	// AWS's rules give, over every case and hop.
	Disagreed []string
}

// InRegionRow is one case on both hops.
type InRegionRow struct {
	Kind         string
	Local, Model results.InRegionCase
}

// Goal is a ratio of two p50s on both hops against its target.
type Goal struct {
	Name, Over, Under  string // the ratio is Over's p50 ÷ Under's p50
	Target             float64
	Local, Model       float64
	LocalMet, ModelMet bool
}

// Case returns the row of kind, a follow-up's included.
func (r *InRegionReport) Case(kind string) (InRegionRow, error) {
	for _, row := range slices.Concat(r.Rows, r.FollowUps) {
		if row.Kind == kind {
			return row, nil
		}
	}
	return InRegionRow{}, fmt.Errorf("no in-region case %q", kind)
}

// Sequence returns the model's own figures for the sequence named name.
func (r *InRegionReport) Sequence(name string) (results.InRegionSequence, error) {
	for _, s := range r.Sequences {
		if s.Name == name {
			return s, nil
		}
	}
	return results.InRegionSequence{}, fmt.Errorf("no model sequence %q", name)
}

// loadInRegion reads and checks TestInRegion's results.
func (rp *Report) loadInRegion(dir string) error {
	r := &rp.InRegion
	if err := results.ReadJSON(filepath.Join(dir, FileInRegion), &r.InRegion); err != nil {
		return err
	}
	if err := r.build(); err != nil {
		return fmt.Errorf("%s: %w", FileInRegion, err)
	}
	return nil
}

func (r *InRegionReport) build() error {
	if r.Ops < 1 || r.Draws < 1 || len(r.Published) == 0 || len(r.Rules) == 0 {
		return fmt.Errorf("ops %d, draws %d, %d published quantiles and %d rules: all must be positive",
			r.Ops, r.Draws, len(r.Published), len(r.Rules))
	}
	hops := map[string]map[string]results.InRegionCase{}
	for _, h := range r.Hops {
		switch h.Kind {
		case hopLocal:
			r.LocalName = h.Name
		case hopModel:
			r.ModelName = h.Name
		default:
			return fmt.Errorf("unknown hop %q", h.Kind)
		}
		if hops[h.Kind] != nil {
			return fmt.Errorf("hop %q twice", h.Kind)
		}
		hops[h.Kind] = map[string]results.InRegionCase{}
		for _, c := range h.Cases {
			// Every case but the cached repeat sends requests; that one
			// may send none (the cache holds the operation).
			if c.Ops < 1 || c.Seconds <= 0 || c.P50ms <= 0 || c.P99ms < c.P50ms ||
				(len(c.Requests) == 0 && c.Kind != results.InRegionRepeatCached) {
				return fmt.Errorf("%s, %s: ops %d, %g s, p50 %g ms, p99 %g ms, requests %v: want a measured case",
					h.Kind, c.Kind, c.Ops, c.Seconds, c.P50ms, c.P99ms, c.Requests)
			}
			hops[h.Kind][c.Kind] = c
			r.Disagreed = append(r.Disagreed, c.Disagreed...)
		}
	}
	for _, hop := range []string{hopLocal, hopModel} {
		if hops[hop] == nil {
			return fmt.Errorf("no %q hop", hop)
		}
	}
	for _, list := range []struct {
		kinds []string
		into  *[]InRegionRow
	}{{inRegionKinds, &r.Rows}, {followUpKinds, &r.FollowUps}} {
		for _, kind := range list.kinds {
			l, okL := hops[hopLocal][kind]
			m, okM := hops[hopModel][kind]
			if !okL || !okM {
				return fmt.Errorf("case %q missing on a hop", kind)
			}
			*list.into = append(*list.into, InRegionRow{Kind: kind, Local: l, Model: m})
		}
	}
	for _, kind := range []string{results.InRegionNew, results.InRegionRepeat, results.InRegionTransact, results.InRegionThreeWrites} {
		if row, _ := r.Case(kind); row.Model.Mean == nil || row.Model.Tail == nil || row.Model.P99 == nil {
			return fmt.Errorf("%s under the model: no split of its time", kind)
		}
	}
	for _, g := range []struct {
		name, over, under string
		target            float64
	}{
		{"repeat p50 ÷ one bare GetItem's p50", results.InRegionRepeat, results.InRegionGet, goalRepeatOverRead},
		{"new operation p50 ÷ one bare TransactWriteItems' p50", results.InRegionNew, results.InRegionTransact, goalNewOverTransact},
	} {
		over, _ := r.Case(g.over)
		under, _ := r.Case(g.under)
		goal := Goal{Name: g.name, Over: g.over, Under: g.under, Target: g.target,
			Local: over.Local.P50ms / under.Local.P50ms, Model: over.Model.P50ms / under.Model.P50ms}
		goal.LocalMet, goal.ModelMet = goal.Local <= g.target, goal.Model <= g.target
		r.Goals = append(r.Goals, goal)
	}
	if len(r.CapacityChecks) == 0 {
		return fmt.Errorf("no capacity checks")
	}
	for _, name := range []string{seqTransact, seqThreeWrites} {
		if _, err := r.Sequence(name); err != nil {
			return err
		}
	}
	return nil
}

// The model sequences the tail section compares.
const (
	seqTransact    = "one TransactWriteItems"
	seqThreeWrites = "three single-item writes in sequence"
)

// requestsByOp shows a case's requests per operation, by operation name:
// "TransactWriteItems 1.00" or "GetItem 1.00 + TransactWriteItems 1.00";
// "none" for a case that sent no request.
func requestsByOp(c results.InRegionCase) string {
	if len(c.Requests) == 0 {
		return "none"
	}
	ops := slices.Sorted(maps.Keys(c.Requests))
	parts := make([]string, len(ops))
	for i, op := range ops {
		parts[i] = fmt.Sprintf("%s %.2f", op, float64(c.Requests[op])/float64(max(c.Ops, 1)))
	}
	return strings.Join(parts, " + ")
}

// verdict is "meets" or "misses".
func verdict(ok bool) string {
	if ok {
		return "meets"
	}
	return "misses"
}
