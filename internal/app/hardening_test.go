package app

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/aivax-examples/idempotent-callback/internal/config"
)

// The hook key is used exactly as stored in SSM, except for the one line
// break `aws ssm put-parameter --value file://…` leaves at its end.
func TestHookKeyTrailingNewline(t *testing.T) {
	for stored, want := range map[string]string{
		"key\n":        "key",
		"key\r\n":      "key",
		"key":          "key",
		"key \n":       "key ",
		" key\t":       " key\t",
		"key\n\n":      "key\n",
		"k\ney\n":      "k\ney",
		"key\r":        "key\r",
		"multi word\n": "multi word",
	} {
		got, err := readParameter(context.Background(), &fakeSSM{out: paramOut(aws.String(stored))}, "/p")
		if err != nil || got != want {
			t.Errorf("stored %q: got %q, %v; want %q", stored, got, err, want)
		}
	}
	for _, stored := range []string{"\n", "\r\n"} {
		if got, err := readParameter(context.Background(), &fakeSSM{out: paramOut(aws.String(stored))}, "/p"); err == nil {
			t.Errorf("stored %q: got %q, want the empty-value error", stored, got)
		}
	}
}

// signingEndpoint is a stand-in DynamoDB endpoint that records the access
// key each request was signed with (DynamoDB Local keeps one database per
// access key unless started with -sharedDb).
func signingEndpoint(t *testing.T) (string, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var keys []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		if _, after, ok := strings.Cut(auth, "Credential="); ok {
			key, _, _ := strings.Cut(after, "/")
			mu.Lock()
			keys = append(keys, key)
			mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"__type":"com.amazonaws.dynamodb.v20120810#ResourceNotFoundException","message":"no table"}`))
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), keys...) }
}

// isolateAWSEnv points the SDK's credential chain at nothing but what the
// test sets.
func isolateAWSEnv(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
		"AWS_DEFAULT_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_CONFIG_FILE", empty)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", empty)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

func localDynamoCallback(t *testing.T, endpoint string) {
	t.Helper()
	cfg := config.Local{
		Common:         config.Common{Policy: "arguments", Retention: 3600e9, MaxBodyBytes: 65536, MinCost: 4, MaxCost: 10},
		Store:          config.StoreSettings{Kind: "dynamodb", Table: "tickets-local", Endpoint: endpoint, Region: "us-east-1"},
		Users:          map[string]config.User{"user-a": {TenantID: "tenant-a", UserID: "alice"}},
		InsecureNoAuth: true,
	}
	h, closer, err := LocalServer(context.Background(), cfg, discard())
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	body := `{"function":{"name":"create_ticket","content":{"title":"t"}},"context":{"externalUserId":"user-a","metadata":{"request_id":"r"}}}`
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/callback", strings.NewReader(body)))
}

// With an endpoint configured, the local server signs with the caller's
// own credentials (the ones the AWS CLI used to create the table), not
// with credentials of its own.
func TestLocalDynamoUsesTheCallersCredentials(t *testing.T) {
	isolateAWSEnv(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDUSEROWNKEY")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	endpoint, keys := signingEndpoint(t)
	localDynamoCallback(t, endpoint)
	got := keys()
	if len(got) == 0 {
		t.Fatal("no request reached the endpoint")
	}
	for _, k := range got {
		if k != "AKIDUSEROWNKEY" {
			t.Fatalf("signed with %q, want the caller's AKIDUSEROWNKEY", k)
		}
	}
}

// Without credentials anywhere in the chain, dummy ones are used.
func TestLocalDynamoFallsBackToDummyCredentials(t *testing.T) {
	isolateAWSEnv(t)
	endpoint, keys := signingEndpoint(t)
	localDynamoCallback(t, endpoint)
	got := keys()
	if len(got) == 0 || got[0] != DummyAccessKeyID {
		t.Fatalf("signed with %q, want the dummy %q", got, DummyAccessKeyID)
	}
}
