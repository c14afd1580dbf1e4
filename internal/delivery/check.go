package delivery

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
)

// Checker is a destination with a check of its own, made without
// creating anything: it says in one line what it found, for a person, and
// whether the destination will accept our tickets.
type Checker interface {
	CheckDestination(ctx context.Context) (line string, ok bool)
}

// CheckKeyPrefix starts the delivery key a Check looks up: no ticket id
// has it, so the helpdesk holds nothing under it.
const CheckKeyPrefix = "deliveries-check-"

// Check performs one lookup of a delivery key no ticket carries and says
// in one line what it tells of the destination's lookups, for a person:
// ok is false when the lookup was refused (401 or 403: the credentials may
// not list tickets) or failed. A destination that cannot be queried is
// ok: its tickets are resent with the same key instead.
//
// A destination that is a Checker checks itself instead (Linear verifies
// its key and team, creating nothing).
func Check(ctx context.Context, d Destination) (line string, ok bool) {
	if c, is := d.(Checker); is {
		return c.CheckDestination(ctx)
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	id := CheckKeyPrefix + hex.EncodeToString(b[:])
	_, found, err := d.Lookup(ctx, id)
	var se *SendError
	switch {
	case err == nil && found:
		return fmt.Sprintf("delivery check: lookups work (the helpdesk answered the lookup of %s, and claims to hold it)", id), true
	case err == nil:
		return "delivery check: lookups work (the helpdesk answered that it holds no ticket under a key no ticket has)", true
	case errors.Is(err, ErrNoLookup):
		return "delivery check: this destination cannot be looked up (a webhook with lookup false): a ticket whose send may have created it is resent with the same key once that send's outcome window has closed", true
	case errors.As(err, &se) && se.Failure == Misconfigured:
		return fmt.Sprintf("delivery check: REFUSED: the helpdesk refused a lookup (HTTP %d): the credentials may not list tickets by external id, "+
			"so a ticket whose send may have created it ends unknown instead of being found; "+
			"Zendesk: the token's user must be an agent or admin with access to all tickets: %v", se.Status, err), false
	}
	return fmt.Sprintf("delivery check: the lookup failed: %v", err), false
}
