package testenv

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
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

// IsolatedAWSEnv isolates the SDK's environment (IsolateAWSEnv), then
// sets fixed test credentials and region, and vars after them.
func IsolatedAWSEnv(t *testing.T, vars map[string]string) {
	IsolateAWSEnv(t)
	for k, v := range map[string]string{"AWS_REGION": Region, "AWS_ACCESS_KEY_ID": "testenv", "AWS_SECRET_ACCESS_KEY": "testenv"} {
		t.Setenv(k, v)
	}
	for k, v := range vars {
		t.Setenv(k, v)
	}
}
