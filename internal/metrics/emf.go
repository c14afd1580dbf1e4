package metrics

// EMFEvent and EMFLines encode CloudWatch Embedded Metric Format: a JSON
// log event whose "_aws" member tells CloudWatch Logs which of the event's
// members are metrics and which are their dimensions, so metrics cost no API call
// and no extra line. No maintained Go library for it is available, so this
// is the small encoder the product needs, holding the format's limits: at
// most 100 metrics per directive, 30 dimensions per dimension set and 100
// values per metric.

import (
	"encoding/json/jsontext"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"time"
)

// The format's limits.
const (
	MaxMetricsPerDirective = 100
	MaxDimensionsPerSet    = 30
	MaxValuesPerMetric     = 100
	maxNameLen             = 1024 // metric names, dimension names and values
	maxNamespaceLen        = 255
)

// Unit is a CloudWatch unit.
type Unit string

// The units the product uses.
const (
	Seconds Unit = "Seconds"
	Count   Unit = "Count"
)

// Metric is one metric and its values (at most MaxValuesPerMetric; EMFLines
// splits more over several events).
type Metric struct {
	Name   string
	Unit   Unit
	Values []float64
}

// Directive is a group of metrics sharing dimension sets. A set may be
// empty: the metrics are then also recorded without dimensions. More than
// MaxMetricsPerDirective metrics are written as several directives.
type Directive struct {
	Dimensions [][]string
	Metrics    []Metric
}

// Dimension is a dimension's value, written as a member of the event.
type Dimension struct {
	Name, Value string
}

// EMFEvent is one log event's metrics.
type EMFEvent struct {
	Namespace  string
	Timestamp  time.Time
	Directives []Directive
	// Dimensions are written as members of the event. A dimension a
	// directive names but that is not listed here must be a string member
	// the log line already carries (see EMFAttr).
	Dimensions []Dimension
}

// ErrInvalidEMF wraps every refusal of an event the format cannot express.
var ErrInvalidEMF = errors.New("emf: invalid event")

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidEMF, fmt.Sprintf(format, a...))
}

// Validate reports what, if anything, makes e inexpressible. Values beyond
// MaxValuesPerMetric are not an error here (EMFLines splits them); EMFAttr
// refuses them.
func (e *EMFEvent) Validate() error {
	if e.Namespace == "" || len(e.Namespace) > maxNamespaceLen {
		return invalid("namespace must be 1 to %d characters", maxNamespaceLen)
	}
	if strings.HasPrefix(e.Namespace, "AWS/") {
		return invalid("namespace %q: the AWS/ prefix is reserved", e.Namespace)
	}
	for _, r := range e.Namespace {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(".-_/#: ", r)) {
			return invalid("namespace %q: %q is not allowed", e.Namespace, r)
		}
	}
	members := map[string]bool{"_aws": true}
	for _, d := range e.Dimensions {
		if err := checkName("dimension", d.Name); err != nil {
			return err
		}
		if d.Value == "" || len(d.Value) > maxNameLen {
			return invalid("dimension %q: value must be 1 to %d characters", d.Name, maxNameLen)
		}
		if members[d.Name] {
			return invalid("member %q given twice", d.Name)
		}
		members[d.Name] = true
	}
	if len(e.Directives) == 0 {
		return invalid("no directive")
	}
	for i, dir := range e.Directives {
		if len(dir.Metrics) == 0 {
			return invalid("directive %d has no metric", i)
		}
		if len(dir.Dimensions) == 0 {
			return invalid("directive %d has no dimension set (use one empty set for none)", i)
		}
		for _, set := range dir.Dimensions {
			if len(set) > MaxDimensionsPerSet {
				return invalid("a dimension set has %d dimensions; at most %d", len(set), MaxDimensionsPerSet)
			}
			for _, name := range set {
				if err := checkName("dimension", name); err != nil {
					return err
				}
			}
		}
		for _, m := range dir.Metrics {
			if err := checkName("metric", m.Name); err != nil {
				return err
			}
			if members[m.Name] {
				return invalid("member %q given twice", m.Name)
			}
			members[m.Name] = true
			if len(m.Values) == 0 {
				return invalid("metric %q has no value", m.Name)
			}
			for _, v := range m.Values {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					return invalid("metric %q: %v is not a JSON number", m.Name, v)
				}
			}
		}
	}
	return nil
}

func checkName(what, name string) error {
	if name == "" || len(name) > maxNameLen {
		return invalid("%s name must be 1 to %d characters", what, maxNameLen)
	}
	return nil
}

// AppendAWS appends the value of the "_aws" member: the timestamp and the
// directives, each with at most MaxMetricsPerDirective metrics. It does
// not validate; EMFAttr and EMFLines do.
func (e *EMFEvent) AppendAWS(b []byte) []byte {
	b = append(b, `{"Timestamp":`...)
	b = strconv.AppendInt(b, e.Timestamp.UnixMilli(), 10)
	b = append(b, `,"CloudWatchMetrics":[`...)
	first := true
	for _, dir := range e.Directives {
		for start := 0; start < len(dir.Metrics); start += MaxMetricsPerDirective {
			if !first {
				b = append(b, ',')
			}
			first = false
			b = append(b, `{"Namespace":`...)
			b, _ = jsontext.AppendQuote(b, e.Namespace)
			b = append(b, `,"Dimensions":[`...)
			for i, set := range dir.Dimensions {
				if i > 0 {
					b = append(b, ',')
				}
				b = append(b, '[')
				for j, name := range set {
					if j > 0 {
						b = append(b, ',')
					}
					b, _ = jsontext.AppendQuote(b, name)
				}
				b = append(b, ']')
			}
			b = append(b, `],"Metrics":[`...)
			for i, m := range dir.Metrics[start:min(start+MaxMetricsPerDirective, len(dir.Metrics))] {
				if i > 0 {
					b = append(b, ',')
				}
				b = append(b, `{"Name":`...)
				b, _ = jsontext.AppendQuote(b, m.Name)
				if m.Unit != "" {
					b = append(b, `,"Unit":`...)
					b, _ = jsontext.AppendQuote(b, string(m.Unit))
				}
				b = append(b, '}')
			}
			b = append(b, "]}"...)
		}
	}
	return append(b, "]}"...)
}

// appendValue appends one metric's values: a number, or an array of them.
func appendValue(b []byte, vs []float64) []byte {
	if len(vs) == 1 {
		return strconv.AppendFloat(b, vs[0], 'g', -1, 64)
	}
	b = append(b, '[')
	for i, v := range vs {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendFloat(b, v, 'g', -1, 64)
	}
	return append(b, ']')
}

// EMFLines encodes e as complete log events, one JSON object each (no
// newline). A metric with more than MaxValuesPerMetric values is spread
// over as many events as it needs, each repeating the dimensions; nothing
// is dropped.
func EMFLines(e EMFEvent) ([][]byte, error) {
	if err := e.Validate(); err != nil {
		return nil, err
	}
	var out [][]byte
	for chunk := 0; ; chunk++ {
		part, more := e.chunk(chunk)
		if len(part.Directives) == 0 {
			break
		}
		b := append([]byte(`{"_aws":`), part.AppendAWS(nil)...)
		for _, d := range part.Dimensions {
			b = append(b, ',')
			b, _ = jsontext.AppendQuote(b, d.Name)
			b = append(b, ':')
			b, _ = jsontext.AppendQuote(b, d.Value)
		}
		for _, dir := range part.Directives {
			for _, m := range dir.Metrics {
				b = append(b, ',')
				b, _ = jsontext.AppendQuote(b, m.Name)
				b = append(b, ':')
				b = appendValue(b, m.Values)
			}
		}
		out = append(out, append(b, '}'))
		if !more {
			break
		}
	}
	return out, nil
}

// chunk returns the event holding values [n*100, (n+1)*100) of each
// metric, keeping only metrics that have values there, and whether a
// later chunk has any.
func (e EMFEvent) chunk(n int) (EMFEvent, bool) {
	part := EMFEvent{Namespace: e.Namespace, Timestamp: e.Timestamp, Dimensions: e.Dimensions}
	lo, hi := n*MaxValuesPerMetric, (n+1)*MaxValuesPerMetric
	more := false
	for _, dir := range e.Directives {
		d := Directive{Dimensions: dir.Dimensions}
		for _, m := range dir.Metrics {
			if len(m.Values) > hi {
				more = true
			}
			if len(m.Values) > lo {
				d.Metrics = append(d.Metrics, Metric{Name: m.Name, Unit: m.Unit, Values: m.Values[lo:min(hi, len(m.Values))]})
			}
		}
		if len(d.Metrics) > 0 {
			part.Directives = append(part.Directives, d)
		}
	}
	return part, more
}

// EMFAttr returns e as one slog attribute whose members a JSON handler writes
// inline into the record's line: "_aws", the listed dimensions and the
// metric values. Dimensions a directive names but e does not list must be
// string members of that same line (the callback's line carries function,
// outcome and code itself). An event needing more than one line (a metric
// with more than MaxValuesPerMetric values) is refused.
func EMFAttr(e EMFEvent) (slog.Attr, error) {
	if err := e.Validate(); err != nil {
		return slog.Attr{}, err
	}
	n := len(e.Dimensions) + 1
	for _, dir := range e.Directives {
		for _, m := range dir.Metrics {
			if len(m.Values) > MaxValuesPerMetric {
				return slog.Attr{}, invalid("metric %q has %d values; one line holds at most %d", m.Name, len(m.Values), MaxValuesPerMetric)
			}
			n++
		}
	}
	attrs := make([]slog.Attr, 0, n)
	attrs = append(attrs, slog.Any("_aws", rawJSON(e.AppendAWS(make([]byte, 0, 512)))))
	for _, d := range e.Dimensions {
		attrs = append(attrs, slog.String(d.Name, d.Value))
	}
	for _, dir := range e.Directives {
		for _, m := range dir.Metrics {
			if len(m.Values) == 1 {
				attrs = append(attrs, slog.Float64(m.Name, m.Values[0]))
			} else {
				attrs = append(attrs, slog.Any(m.Name, rawJSON(appendValue(nil, m.Values))))
			}
		}
	}
	// An empty key inlines the group's members into the line.
	return slog.Attr{Key: "", Value: slog.GroupValue(attrs...)}, nil
}

// rawJSON is JSON text the handler writes as is.
type rawJSON []byte

// MarshalJSON returns the text.
func (r rawJSON) MarshalJSON() ([]byte, error) { return r, nil }
