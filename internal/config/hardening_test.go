package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/config"
	"github.com/aivax-examples/idempotent-callback/internal/nonce"
)

// fromEnv is the configuration the callback function starts with.
func fromEnv(vars map[string]string) (config.Lambda, error) { return checkedEnv(vars) }

// The accepted nonce costs default to AIVAX's 9 with one step of headroom,
// and no configuration may allow more than 12.
func TestNonceCostRange(t *testing.T) {
	c, err := fromEnv(nil)
	if err != nil || c.MinCost != 4 || c.MaxCost != 10 {
		t.Fatalf("defaults %d..%d, %v; want 4..10", c.MinCost, c.MaxCost, err)
	}
	if c, err := fromEnv(map[string]string{"NONCE_MAX_COST": "12"}); err != nil || c.MaxCost != 12 {
		t.Fatalf("NONCE_MAX_COST=12: %d, %v", c.MaxCost, err)
	}
	for _, v := range []string{"13", "20", "31"} {
		if _, err := fromEnv(map[string]string{"NONCE_MAX_COST": v}); err == nil || !strings.Contains(err.Error(), "NONCE_MAX_COST") {
			t.Errorf("NONCE_MAX_COST=%s: %v, want an error naming NONCE_MAX_COST", v, err)
		}
		if _, err := checkedFile(`{"nonce_max_cost":` + v + `}`); err == nil || !strings.Contains(err.Error(), "nonce_max_cost") {
			t.Errorf("nonce_max_cost %s: %v, want an error naming nonce_max_cost", v, err)
		}
	}
	if _, err := fromEnv(map[string]string{"NONCE_MIN_COST": "13"}); err == nil {
		t.Error("NONCE_MIN_COST=13 accepted")
	}
	if nonce.DefaultMaxCost != 10 || nonce.CapCost != 12 {
		t.Errorf("nonce defaults %d, cap %d", nonce.DefaultMaxCost, nonce.CapCost)
	}
}

// A retention under a minute is refused at start with an error naming the
// setting, not accepted to deduplicate nothing.
func TestRetentionFloor(t *testing.T) {
	for _, v := range []string{"1ns", "1s", "30s", "59s", "59999ms", "0.9m"} {
		if _, err := fromEnv(map[string]string{"RETENTION": v}); err == nil || !strings.Contains(err.Error(), "RETENTION") {
			t.Errorf("RETENTION=%s: %v, want an error naming RETENTION", v, err)
		}
		if _, err := config.ParseFile([]byte(`{"retention":"` + v + `"}`)); err == nil || !strings.Contains(err.Error(), "retention") {
			t.Errorf("retention %s: %v, want an error naming retention", v, err)
		}
	}
	for v, want := range map[string]time.Duration{"1m": time.Minute, "60s": time.Minute, "90m": 90 * time.Minute, "24h": 24 * time.Hour} {
		if c, err := fromEnv(map[string]string{"RETENTION": v}); err != nil || c.Retention != want {
			t.Errorf("RETENTION=%s: %v, %v", v, c.Retention, err)
		}
	}
}
