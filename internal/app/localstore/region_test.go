package localstore

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
)

// The local AWS configuration takes its region from the SDK's chain, as
// the AWS CLI does, and the file's store.region only when set: a region
// of the program's own choosing would let the operator's command act on a
// table of the same name in another region.
func TestLocalRegionFollowsTheSDKChain(t *testing.T) {
	profile := func(t *testing.T, region string) {
		t.Helper()
		p := filepath.Join(t.TempDir(), "config")
		if err := os.WriteFile(p, []byte("[default]\nregion = "+region+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Setenv("AWS_CONFIG_FILE", p)
	}
	for _, tc := range []struct {
		name     string
		setup    func(t *testing.T)
		file     string // store.region
		endpoint string
		want     string
	}{
		{"AWS_REGION", func(t *testing.T) { t.Setenv("AWS_REGION", "eu-west-3") }, "", "", "eu-west-3"},
		{"AWS_DEFAULT_REGION", func(t *testing.T) { t.Setenv("AWS_DEFAULT_REGION", "ap-south-1") }, "", "", "ap-south-1"},
		{"the profile", func(t *testing.T) { profile(t, "sa-east-1") }, "", "", "sa-east-1"},
		{"store.region wins", func(t *testing.T) { t.Setenv("AWS_REGION", "eu-west-3") }, "ca-central-1", "", "ca-central-1"},
		{"DynamoDB Local with none", func(*testing.T) {}, "", "http://127.0.0.1:8000", LocalRegion},
		{"DynamoDB Local keeps AWS_REGION", func(t *testing.T) { t.Setenv("AWS_REGION", "eu-west-3") }, "", "http://127.0.0.1:8000", "eu-west-3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testenv.IsolateAWSEnv(t)
			t.Setenv("AWS_REGION", "")
			t.Setenv("AWS_DEFAULT_REGION", "")
			tc.setup(t)
			cfg, err := LocalAWSConfig(context.Background(), tc.file, tc.endpoint, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Region != tc.want {
				t.Fatalf("region = %q, want %q", cfg.Region, tc.want)
			}
		})
	}
}

// Real AWS with no region anywhere is refused, naming what to set, rather
// than guessed.
func TestLocalRegionMissingIsAnError(t *testing.T) {
	testenv.IsolateAWSEnv(t)
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	_, err := LocalAWSConfig(context.Background(), "", "", slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "store.region") || !strings.Contains(err.Error(), "AWS_REGION") {
		t.Fatalf("err = %v, want one naming store.region and AWS_REGION", err)
	}
}
