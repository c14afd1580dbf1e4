// Package redact is the contract's one rule for showing a URL: every log
// line, error text, stored field and operator's output shows a
// destination URL through it.
package redact

import (
	"net/url"
	"strings"
)

// URL is a destination URL as every log line, error text, stored
// field and operator's output shows it: scheme and host (with its port)
// only. A path becomes "/*", and user info, query and fragment are left
// out, since any of them may carry a secret: Slack, Zapier and Teams put
// theirs in the path, and in Make-style URLs
// (https://hook.eu1.make.com/<token>) the first path segment is the secret
// itself. So https://hooks.slack.com/services/T0/B0/XYZ?token=abc is
// https://hooks.slack.com/*. It is the contract's one rule for showing a
// URL, so every layer that shows one calls it.
func URL(u *url.URL) string {
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
	if strings.TrimPrefix(u.EscapedPath(), "/") != "" {
		b.WriteString("/*")
	}
	return b.String()
}

// RawURL is URL of a URL not yet parsed, "[unparsable url]"
// when it does not parse.
func RawURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "[unparsable url]"
	}
	return URL(u)
}
