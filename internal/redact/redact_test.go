package redact_test

import (
	"testing"

	"github.com/aivax-examples/idempotent-callback/internal/redact"
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
		if got := redact.RawURL(raw); got != want {
			t.Errorf("RawURL(%q) = %q; want %q", raw, got, want)
		}
	}
}
