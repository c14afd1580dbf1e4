// Package loopback says whether a host names this machine. It is the one
// home of that rule for the settings that depend on it: http allowed only
// to a loopback helpdesk or issuer, insecure_no_auth and metrics_listen
// only on a loopback address.
package loopback

import (
	"net"
	"strings"
)

// Host reports whether host (no port) names this machine: "localhost", in
// any case, or a loopback IP address (127.0.0.0/8, ::1).
func Host(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
