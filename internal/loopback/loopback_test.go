package loopback_test

import (
	"testing"

	"github.com/aivax-examples/idempotent-callback/internal/loopback"
)

func TestHost(t *testing.T) {
	for host, want := range map[string]bool{
		"localhost": true, "LocalHost": true, "127.0.0.1": true, "127.1.2.3": true, "::1": true,
		"": false, "0.0.0.0": false, "::": false, "192.0.2.10": false, "example.org": false, "localhost.example.org": false,
	} {
		if got := loopback.Host(host); got != want {
			t.Errorf("Host(%q) = %t, want %t", host, got, want)
		}
	}
}
