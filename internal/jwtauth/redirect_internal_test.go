package jwtauth

import (
	"net/http"
	"strings"
	"testing"
)

// TestCheckRedirect: each hop obeys CheckURL, and a hop from a host that
// is not loopback never leads to one that is (a real issuer cannot point
// the fetch at the server's own machine); loopback to loopback is the
// development issuer's and is followed.
func TestCheckRedirect(t *testing.T) {
	req := func(u string) *http.Request {
		r, err := http.NewRequest(http.MethodGet, u, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, c := range []struct {
		from, to string
		refused  string // "" when followed
	}{
		{"https://login.example.com/jwks", "https://cdn.example.net/jwks", ""},
		{"https://127.0.0.1:8443/jwks", "http://127.0.0.1:8080/jwks", ""},
		{"http://localhost:3210/jwks", "https://login.example.com/jwks", ""},
		{"https://login.example.com/jwks", "http://cdn.example.net/jwks", "https is required"},
		{"https://127.0.0.1:8443/jwks", "http://10.0.0.1/jwks", "https is required"},
		{"https://login.example.com/jwks", "http://127.0.0.1/jwks", "to loopback"},
		{"https://login.example.com/jwks", "https://localhost/jwks", "to loopback"},
		{"https://login.example.com/jwks", "https://user:pw@cdn.example.net/jwks", "credentials"},
		{"https://login.example.com/jwks", "file:///etc/passwd", "not an absolute https URL"},
	} {
		err := checkRedirect(req(c.to), []*http.Request{req(c.from)})
		switch {
		case c.refused == "" && err != nil:
			t.Errorf("%s → %s refused: %v; want followed", c.from, c.to, err)
		case c.refused != "" && (err == nil || !strings.Contains(err.Error(), c.refused)):
			t.Errorf("%s → %s: %v; want refused, saying %q", c.from, c.to, err, c.refused)
		}
	}
	via := []*http.Request{req("https://a.example/1"), req("https://a.example/2"), req("https://a.example/3"), req("https://a.example/4")}
	if err := checkRedirect(req("https://a.example/5"), via); err == nil {
		t.Errorf("a redirect after %d hops was followed; at most %d are", len(via)-1, MaxRedirects)
	}
}
