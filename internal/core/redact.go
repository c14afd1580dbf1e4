package core

import (
	"net/url"
	"strings"
)

// RedactURL is a destination URL as every log line, error text, stored
// field and operator's output shows it: scheme, host (with its port) and
// the first path segment; the rest of the path becomes "/*", and user
// info, query and fragment are left out, since any of them may carry a
// secret (Slack, Zapier and Teams put theirs in the path). So
// https://hooks.slack.com/services/T0/B0/XYZ?token=abc is
// https://hooks.slack.com/services/*. It is the contract's one rule for
// showing a URL, so every layer that shows one calls it.
func RedactURL(u *url.URL) string {
	if u == nil {
		return ""
	}
	if u.Opaque != "" {
		return u.Scheme + ":*"
	}
	var b strings.Builder
	if u.Scheme != "" {
		b.WriteString(u.Scheme + ":")
	}
	if u.Host != "" || u.Scheme != "" {
		b.WriteString("//" + u.Host)
	}
	first, _, more := CutFirstSegment(u.EscapedPath())
	if first != "" || more {
		b.WriteString("/" + first)
	}
	if more {
		b.WriteString("/*")
	}
	return b.String()
}

// RedactRawURL is RedactURL of a URL not yet parsed, "[unparsable url]"
// when it does not parse.
func RedactRawURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "[unparsable url]"
	}
	return RedactURL(u)
}

// CutFirstSegment splits the path "/a/b/c" into "a" and "b/c".
func CutFirstSegment(p string) (first, rest string, more bool) {
	return strings.Cut(strings.TrimPrefix(p, "/"), "/")
}
