//go:build notrace

package otelsetup

import (
	"context"
	"strings"
	"testing"
)

// Built with -tags notrace, Setup installs the no-op provider when nothing
// is to be exported, and refuses an endpoint, naming the tag.
func TestNoTraceBuild(t *testing.T) {
	p, err := Setup(context.Background(), Options{Getenv: func(string) string { return "" }})
	if err != nil || p.Exporting() {
		t.Fatalf("no endpoint: %v, exporting %v", err, p.Exporting())
	}
	_, err = Setup(context.Background(), Options{Getenv: func(k string) string {
		return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}[k]
	}})
	if err == nil || !strings.Contains(err.Error(), "notrace") {
		t.Fatalf("endpoint set: %v, want an error naming the notrace tag", err)
	}
}
