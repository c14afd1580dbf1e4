package delivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/aivax-examples/idempotent-callback/internal/redact"
)

// Scrubbing is d with every credential in secrets scrubbed by value
// (redact.New: as it is and as an answer may quote it) from every error
// text and check line it gives: its sends, lookups, effects and
// CheckDestination. It is the composition root's wrapper around every
// destination it builds, so a destination that echoes a credential in
// its error answer cannot have it logged, stored as delivery_error or
// printed by the operator's check, whatever text its adapter made of the
// answer. The wrapper implements EffectSender exactly when d does;
// KeyedCreator and Checker answer as d would (CheckDestination is
// Check's own line for a d that checks nothing itself).
func Scrubbing(d Destination, secrets ...string) Destination {
	s := scrubbing{d: d, v: redact.New(secrets...)}
	if e, ok := d.(EffectSender); ok {
		return scrubbingEffects{s, e}
	}
	return s
}

type scrubbing struct {
	d Destination
	v redact.Values
}

var (
	_ KeyedCreator = scrubbing{}
	_ Checker      = scrubbing{}
	_ EffectSender = scrubbingEffects{}
)

func (s scrubbing) Send(ctx context.Context, t HelpdeskTicket) (Receipt, error) {
	r, err := s.d.Send(ctx, t)
	return r, scrubError(err, s.v)
}

func (s scrubbing) Lookup(ctx context.Context, id string) (Receipt, bool, error) {
	r, found, err := s.d.Lookup(ctx, id)
	return r, found, scrubError(err, s.v)
}

func (s scrubbing) CreatesKeyedByID() bool { return keyedByID(s.d) }

func (s scrubbing) CheckDestination(ctx context.Context) (string, bool) {
	line, ok := Check(ctx, s.d)
	return s.v.Scrub(line), ok
}

// String, GoString and LogValue show d as d shows itself (its settings,
// credentials redacted), never the wrapper's values.
func (s scrubbing) String() string {
	if st, ok := s.d.(fmt.Stringer); ok {
		return s.v.Scrub(st.String())
	}
	return fmt.Sprintf("%T", s.d)
}

func (s scrubbing) GoString() string { return s.String() }

func (s scrubbing) LogValue() slog.Value {
	if lv, ok := s.d.(slog.LogValuer); ok {
		return lv.LogValue()
	}
	return slog.StringValue(s.String())
}

type scrubbingEffects struct {
	scrubbing
	e EffectSender
}

func (s scrubbingEffects) SendEffect(ctx context.Context, e Effect) (Receipt, error) {
	r, err := s.e.SendEffect(ctx, e)
	return r, scrubError(err, s.v)
}

func (s scrubbingEffects) LookupEffect(ctx context.Context, e Effect) (Receipt, bool, error) {
	r, found, err := s.e.LookupEffect(ctx, e)
	return r, found, scrubError(err, s.v)
}

// scrubError is err with v scrubbed from its text. The *SendError in its
// chain, if any, is rebuilt with the same Failure, Status and RetryAfter
// and a scrubbed cause, so errors.As finds one whose text is clean;
// errors.Is still answers for err's chain (ErrNoLookup, the context's
// errors); no other error of the chain is reachable, since its text may
// hold the credential.
func scrubError(err error, v redact.Values) error {
	if err == nil || v.Empty() {
		return err
	}
	var rebuilt *SendError
	if se := (*SendError)(nil); errors.As(err, &se) {
		rebuilt = &SendError{Failure: se.Failure, Status: se.Status, RetryAfter: se.RetryAfter}
		if se.Err != nil {
			rebuilt.Err = &scrubbed{text: v.Scrub(se.Err.Error()), orig: se.Err}
		}
		if se == err { //nolint:errorlint // identity: err is the SendError itself, which rebuilt replaces whole
			return rebuilt
		}
	}
	out := &scrubbed{text: v.Scrub(err.Error()), orig: err}
	if rebuilt != nil {
		out.next = rebuilt
	}
	return out
}

// scrubbed is an error whose text was scrubbed: next (a rebuilt
// *SendError, or nil) is what errors.As reaches; orig answers errors.Is.
type scrubbed struct {
	text string
	orig error
	next error
}

func (e *scrubbed) Error() string        { return e.text }
func (e *scrubbed) Is(target error) bool { return errors.Is(e.orig, target) }
func (e *scrubbed) Unwrap() error        { return e.next }
