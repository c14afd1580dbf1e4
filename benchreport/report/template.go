package report

import (
	_ "embed"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"text/template"

	"github.com/aivax-examples/idempotent-callback/internal/bench/results"
)

//go:embed benchmarks.md.tmpl
var templateText string

// inRegionTemplateText defines the template "inregion" (section 8), which
// benchmarks.md.tmpl calls.
//
//go:embed inregion.md.tmpl
var inRegionTemplateText string

var tmpl = template.Must(template.Must(template.New("benchmarks.md").Funcs(template.FuncMap{
	"add": func(a, b float64) float64 { return a + b },
	"sub": func(a, b float64) float64 { return a - b },
	"div": func(a, b float64) float64 { return a / b },
	"mul": func(a, b float64) float64 { return a * b },
	"pctMore": func(a, b float64) float64 { // how much more b is than a, in %
		return (b - a) / a * 100
	},
	"float":  func(n int64) float64 { return float64(n) },
	"mib":    func(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) },
	"kib":    func(n int64) string { return fmt.Sprintf("%.0f KiB", float64(n)/1024) },
	"median": median,
	"first":  func(vs []float64) float64 { return slices.Min(vs) },
	"last":   func(vs []float64) float64 { return slices.Max(vs) },
	"stat":   fmtStat,
	"others": others,
	// the in-region section (inregion.go)
	"requestsByOp": requestsByOp,
	"verdict":      verdict,
	"peak": func(rp *Report, kind, mode string) results.ThroughputCell {
		var best results.ThroughputCell
		for _, c := range rp.cells(kind, mode) {
			if c.PerSecond() > best.PerSecond() {
				best = c
			}
		}
		return best
	},
	"cellAt": func(rp *Report, kind, mode string, pos int) (results.ThroughputCell, error) {
		// pos 0 is the fewest clients, -1 the most.
		cs := rp.cells(kind, mode)
		if pos < 0 {
			pos += len(cs)
		}
		if pos < 0 || pos >= len(cs) {
			return results.ThroughputCell{}, fmt.Errorf("no %s %s cell %d", kind, mode, pos)
		}
		return cs[pos], nil
	},
	"cellsWithOthers": func(rp *Report) int {
		n := 0
		for _, c := range rp.Throughput.Cells {
			if len(c.Other) > 0 {
				n++
			}
		}
		return n
	},
}).Parse(templateText)).Parse(inRegionTemplateText))

// median of unsorted values.
func median(vs []float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return math.NaN()
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// fmtStat shows a median and its confidence interval, with prec decimals.
func fmtStat(prec int, s Stat) string {
	if s.N < 2 || s.Lo == s.Hi || math.IsInf(s.Lo, 0) || math.IsInf(s.Hi, 0) {
		// Too few runs for an interval (benchmath needs six at 95 %).
		return fmt.Sprintf("%.*f", prec, s.Center)
	}
	return fmt.Sprintf("%.*f (%.*f–%.*f)", prec, s.Center, prec, s.Lo, prec, s.Hi)
}

// others lists answers other than the expected one, or "none".
func others(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(m))
	for k, v := range m {
		parts = append(parts, fmt.Sprintf("%s: %d", k, v))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}
