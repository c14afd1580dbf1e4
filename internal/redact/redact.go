// Package redact scrubs credentials out of text by value: every error
// text, log line and stored field a helpdesk's answer can reach. A
// destination that echoes a credential in its error answer (a proxy
// quoting the Authorization header, a receiver printing the secret it
// expected) would otherwise have it logged, stored as delivery_error and
// printed by the operator's check.
package redact

import (
	"cmp"
	"encoding/json"
	"log/slog"
	"net/url"
	"slices"
	"strings"
)

// Mark replaces a credential.
const Mark = "[redacted]"

// MinLen is the shortest value scrubbed: no real credential is shorter,
// and scrubbing a one-letter value would garble every text.
const MinLen = 4

// Values is a set of credentials to scrub. The zero Values scrubs nothing.
type Values struct {
	values []string
	forms  []string // longest first
}

// New is the set of values: each as it is and as the answer may quote it
// (JSON-escaped, with "/" escaped as "\/", URL-escaped). Values shorter
// than MinLen are ignored.
func New(values ...string) Values {
	var forms []string
	for _, v := range values {
		if len(v) < MinLen {
			continue
		}
		q, _ := json.Marshal(v)
		forms = append(forms, v, string(q[1:len(q)-1]),
			strings.ReplaceAll(v, "/", `\/`), url.QueryEscape(v), url.PathEscape(v))
	}
	slices.SortFunc(forms, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	return Values{values: slices.Clone(values), forms: slices.Compact(forms)}
}

// Add is v with values added.
func (v Values) Add(values ...string) Values {
	return New(append(slices.Clone(v.values), values...)...)
}

// String, GoString and LogValue never show the values.
func (v Values) String() string { return "redact.Values{[redacted]}" }

// GoString is String.
func (v Values) GoString() string { return v.String() }

// LogValue is String.
func (v Values) LogValue() slog.Value { return slog.StringValue(v.String()) }

// Empty reports whether v scrubs nothing.
func (v Values) Empty() bool { return len(v.forms) == 0 }

// Scrub is s with every form of every value replaced by Mark.
func (v Values) Scrub(s string) string {
	for _, f := range v.forms {
		if strings.Contains(s, f) {
			s = strings.ReplaceAll(s, f, Mark)
		}
	}
	return s
}
