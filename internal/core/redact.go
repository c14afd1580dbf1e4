package core

import "github.com/aivax-examples/idempotent-callback/internal/redact"

// RedactRawURL is redact.RawURL, for the composition roots and the
// settings, which call it by this name.
func RedactRawURL(raw string) string { return redact.RawURL(raw) }
