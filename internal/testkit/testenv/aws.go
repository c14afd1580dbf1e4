package testenv

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
)

// FakeSSM serves SSM's GetParameter (with decryption) for one SecureString
// and counts the reads in asked; any other request is refused. Point the
// SDK at it with AWS_ENDPOINT_URL_SSM.
func FakeSSM(t testing.TB, name, value string, asked *atomic.Int32) (url string) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Name           string
			WithDecryption bool
		}
		if r.Header.Get("X-Amz-Target") != "AmazonSSM.GetParameter" || json.NewDecoder(r.Body).Decode(&in) != nil ||
			in.Name != name || !in.WithDecryption {
			http.Error(w, `{"__type":"ParameterNotFound"}`, http.StatusBadRequest)
			return
		}
		asked.Add(1)
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		_ = json.NewEncoder(w).Encode(map[string]any{"Parameter": map[string]any{
			"Name": name, "Type": "SecureString", "Value": value, "Version": 1}})
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// IsolatedAWSEnv sets the environment the AWS SDK reads so that a test sees
// fixed test credentials and region, and none of the machine's profiles,
// files or instance metadata; vars are set after.
func IsolatedAWSEnv(t *testing.T, vars map[string]string) {
	dir := t.TempDir()
	for k, v := range map[string]string{
		"AWS_REGION": Region, "AWS_ACCESS_KEY_ID": "testenv", "AWS_SECRET_ACCESS_KEY": "testenv",
		"AWS_SESSION_TOKEN": "", "AWS_PROFILE": "", "AWS_CONFIG_FILE": filepath.Join(dir, "none"),
		"AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "none"), "AWS_EC2_METADATA_DISABLED": "true",
	} {
		t.Setenv(k, v)
	}
	for k, v := range vars {
		t.Setenv(k, v)
	}
}
