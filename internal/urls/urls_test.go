package urls_test

import (
	"testing"

	"github.com/aivax-examples/idempotent-callback/internal/urls"
)

func TestRedact(t *testing.T) {
	for raw, want := range map[string]string{
		"https://hooks.slack.com/services/T000/B000/XXXXSECRET?token=abc": "https://hooks.slack.com/*",
		"https://hook.eu1.make.com/abcdefSECRETTOKEN":                     "https://hook.eu1.make.com/*", // the first segment is the secret
		"https://u:pw@h.example:8443/hook/a#frag":                         "https://h.example:8443/*",
		"https://h.example/hook?x=1":                                      "https://h.example/*",
		"https://h.example/hook/":                                         "https://h.example/*",
		"https://h.example":                                               "https://h.example",
		"https://h.example/":                                              "https://h.example",
		"https://h.example?token=abc":                                     "https://h.example",
		"http://127.0.0.1:9/a%2Fb/c":                                      "http://127.0.0.1:9/*",
		"mailto:someone@example.com":                                      "mailto:*",
		"%zz":                                                             "[unparsable url]",
	} {
		if got := urls.RedactedRaw(raw); got != want {
			t.Errorf("RedactedRaw(%q) = %q; want %q", raw, got, want)
		}
	}
}

func TestLoopback(t *testing.T) {
	for host, want := range map[string]bool{
		"localhost": true, "LocalHost": true, "127.0.0.1": true, "127.1.2.3": true, "::1": true,
		"": false, "0.0.0.0": false, "::": false, "192.0.2.10": false, "example.org": false, "localhost.example.org": false,
	} {
		if got := urls.Loopback(host); got != want {
			t.Errorf("Loopback(%q) = %t, want %t", host, got, want)
		}
	}
}
