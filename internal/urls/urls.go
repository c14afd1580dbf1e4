// Package urls holds the contract's two rules about a URL: how every log
// line, error text, stored field and operator's output shows a
// destination URL (Redacted), and whether a host names this machine
// (Loopback), the one home of that rule for the settings that depend on
// it: http allowed only to a loopback helpdesk or issuer,
// insecure_no_auth and metrics_listen only on a loopback address.
package urls

import (
	"net"
	"net/url"
	"strings"
)

// Redacted is a destination URL as every log line, error text, stored
// field and operator's output shows it: scheme and host (with its port)
// only. A path becomes "/*", and user info, query and fragment are left
// out, since any of them may carry a secret: Slack, Zapier and Teams put
// theirs in the path, and in Make-style URLs
// (https://hook.eu1.make.com/<token>) the first path segment is the secret
// itself. So https://hooks.slack.com/services/T0/B0/XYZ?token=abc is
// https://hooks.slack.com/*. It is the contract's one rule for showing a
// URL, so every layer that shows one calls it, except internal/config,
// which imports nothing of this module and prints a configured URL as its
// scheme and host alone.
func Redacted(u *url.URL) string {
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

// RedactedRaw is Redacted of a URL not yet parsed, "[unparsable url]"
// when it does not parse.
func RedactedRaw(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "[unparsable url]"
	}
	return Redacted(u)
}

// Loopback reports whether host (no port) names this machine: "localhost", in
// any case, or a loopback IP address (127.0.0.0/8, ::1).
func Loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
