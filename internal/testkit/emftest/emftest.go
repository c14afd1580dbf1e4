// Package emftest reads Embedded Metric Format log lines back the way
// CloudWatch Logs does, checking them against the format's rules, so tests
// can assert what metrics a line yields.
package emftest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
)

// Datum is one metric value CloudWatch extracts: a metric under one
// dimension set.
type Datum struct {
	Namespace  string
	Name       string
	Unit       string
	Dimensions map[string]string // empty for a metric without dimensions
	Values     []float64
}

// Key names the datum's metric and dimensions, e.g.
// "callbacks_total{function=create_ticket,outcome=created}".
func (d Datum) Key() string {
	names := make([]string, 0, len(d.Dimensions))
	for n := range d.Dimensions {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = n + "=" + d.Dimensions[n]
	}
	return d.Name + "{" + strings.Join(parts, ",") + "}"
}

// Limits of the format.
const (
	maxMetrics    = 100
	maxDimensions = 30
	maxValues     = 100
)

// Parse checks one log line against the format and returns the data it
// yields. A line without "_aws" yields nothing and no error.
func Parse(line []byte) ([]Datum, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	var root map[string]json.RawMessage
	if err := dec.Decode(&root); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("data after the JSON object")
	}
	raw, ok := root["_aws"]
	if !ok {
		return nil, nil
	}
	var aws struct {
		Timestamp         *json.Number
		CloudWatchMetrics []struct {
			Namespace  string
			Dimensions [][]string
			Metrics    []struct {
				Name string
				Unit string
			}
		}
	}
	if err := strictUnmarshal(raw, &aws); err != nil {
		return nil, fmt.Errorf("_aws: %w", err)
	}
	if aws.Timestamp == nil {
		return nil, fmt.Errorf("_aws.Timestamp missing")
	}
	if _, err := aws.Timestamp.Int64(); err != nil {
		return nil, fmt.Errorf("_aws.Timestamp %s is not an integer", *aws.Timestamp)
	}
	if len(aws.CloudWatchMetrics) == 0 {
		return nil, fmt.Errorf("_aws.CloudWatchMetrics is empty")
	}
	var out []Datum
	for _, dir := range aws.CloudWatchMetrics {
		if dir.Namespace == "" {
			return nil, fmt.Errorf("directive without Namespace")
		}
		if len(dir.Metrics) > maxMetrics {
			return nil, fmt.Errorf("directive has %d metrics; at most %d", len(dir.Metrics), maxMetrics)
		}
		if len(dir.Dimensions) == 0 {
			return nil, fmt.Errorf("directive without Dimensions")
		}
		for _, set := range dir.Dimensions {
			if len(set) > maxDimensions {
				return nil, fmt.Errorf("dimension set has %d dimensions; at most %d", len(set), maxDimensions)
			}
		}
		for _, m := range dir.Metrics {
			vals, err := values(root[m.Name])
			if err != nil {
				return nil, fmt.Errorf("metric %q: %w", m.Name, err)
			}
			for _, set := range dir.Dimensions {
				dims := map[string]string{}
				for _, name := range set {
					var v string
					if err := json.Unmarshal(root[name], &v); err != nil || v == "" {
						return nil, fmt.Errorf("dimension %q is not a non-empty string member", name)
					}
					dims[name] = v
				}
				out = append(out, Datum{Namespace: dir.Namespace, Name: m.Name, Unit: m.Unit, Dimensions: dims, Values: vals})
			}
		}
	}
	return out, nil
}

func values(raw json.RawMessage) ([]float64, error) {
	if raw == nil {
		return nil, fmt.Errorf("no member")
	}
	var one float64
	if err := json.Unmarshal(raw, &one); err == nil {
		return []float64{one}, nil
	}
	var many []float64
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, fmt.Errorf("not a number or an array of numbers")
	}
	if len(many) == 0 || len(many) > maxValues {
		return nil, fmt.Errorf("%d values; 1 to %d", len(many), maxValues)
	}
	return many, nil
}

func strictUnmarshal(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// Lines reads back, the way CloudWatch Logs does, every line of logs
// that carries metrics: each as a JSON object and as its data. A line the
// format refuses fails the test.
func Lines(t testing.TB, logs string) (lines []map[string]any, data [][]Datum) {
	t.Helper()
	for l := range strings.Lines(logs) {
		d, err := Parse([]byte(l))
		if err != nil {
			t.Fatalf("line refused by the format: %v\n%s", err, l)
		}
		if d == nil {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, m)
		data = append(data, d)
	}
	return lines, data
}

// Sum adds the values of each datum by Key, over many lines' data.
func Sum(data []Datum) map[string]float64 {
	m := map[string]float64{}
	for _, d := range data {
		for _, v := range d.Values {
			m[d.Key()] += v
		}
	}
	return m
}
