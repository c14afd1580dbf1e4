package delivery_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aivax-examples/idempotent-callback/internal/delivery"
)

const echoed = "s3cret-CREDENTIAL"

// echoing is a destination whose every error quotes echoed, in the shapes
// the adapters return: a *SendError, one wrapped ("... lookup: %w"),
// ErrNoLookup and a timeout, wrapped with the credential beside them.
type echoing struct{ err error }

func (e echoing) Send(context.Context, delivery.HelpdeskTicket) (delivery.Receipt, error) {
	return delivery.Receipt{}, e.err
}

func (e echoing) Lookup(context.Context, string) (delivery.Receipt, bool, error) {
	return delivery.Receipt{}, false, e.err
}

type echoingEffects struct{ echoing }

func (e echoingEffects) SendEffect(context.Context, delivery.Effect) (delivery.Receipt, error) {
	return delivery.Receipt{}, e.err
}

func (e echoingEffects) LookupEffect(context.Context, delivery.Effect) (delivery.Receipt, bool, error) {
	return delivery.Receipt{}, false, e.err
}

// TestScrubbingKeepsWhatTheEngineReads: Scrubbing's errors carry no
// credential in any text, and still answer what the engine asks of them:
// errors.As finds a *SendError with the same Failure, Status and
// RetryAfter; errors.Is finds ErrNoLookup and the context's errors; nil
// stays nil. The wrapper is an EffectSender exactly when the destination
// is, and printing it shows no credential.
func TestScrubbingKeepsWhatTheEngineReads(t *testing.T) {
	se := &delivery.SendError{Failure: delivery.Misconfigured, Status: 401, RetryAfter: 7, Err: errors.New("answered 401: bad key " + echoed)}
	for _, c := range []struct {
		name string
		err  error
		is   error
	}{
		{"a send error", se, nil},
		{"a wrapped send error", fmt.Errorf("zendesk lookup (%s): %w", echoed, se), nil},
		{"no lookup", fmt.Errorf("%w (%s)", delivery.ErrNoLookup, echoed), delivery.ErrNoLookup},
		{"a timeout", fmt.Errorf("%s: %w", echoed, context.DeadlineExceeded), context.DeadlineExceeded},
	} {
		for _, d := range []delivery.Destination{
			delivery.Scrubbing(echoing{c.err}, echoed),
			delivery.Scrubbing(echoingEffects{echoing{c.err}}, echoed),
		} {
			_, sendErr := d.Send(context.Background(), delivery.HelpdeskTicket{})
			_, _, lookErr := d.Lookup(context.Background(), "x")
			errs := []error{sendErr, lookErr}
			if es, ok := d.(delivery.EffectSender); ok {
				_, effErr := es.SendEffect(context.Background(), delivery.Effect{})
				_, _, effLookErr := es.LookupEffect(context.Background(), delivery.Effect{})
				errs = append(errs, effErr, effLookErr)
			}
			for _, err := range errs {
				if text := fmt.Sprintf("%v %+v %#v", err, err, err); strings.Contains(text, echoed) || !strings.Contains(err.Error(), "[redacted]") {
					t.Errorf("%s: %s; want the credential scrubbed", c.name, text)
				}
				var got *delivery.SendError
				if errors.As(c.err, new(*delivery.SendError)) {
					if !errors.As(err, &got) || got.Failure != se.Failure || got.Status != se.Status || got.RetryAfter != se.RetryAfter ||
						strings.Contains(got.Error(), echoed) || strings.Contains(fmt.Sprint(got.Err), echoed) {
						t.Errorf("%s: errors.As gives %#v; want the send error's fields, scrubbed", c.name, got)
					}
				} else if errors.As(err, &got) {
					t.Errorf("%s: errors.As found a send error %v in an error without one", c.name, got)
				}
				if c.is != nil && !errors.Is(err, c.is) {
					t.Errorf("%s: errors.Is(%v, %v) is false", c.name, err, c.is)
				}
			}
		}
	}
	plain := delivery.Scrubbing(echoing{nil}, echoed)
	if _, err := plain.Send(context.Background(), delivery.HelpdeskTicket{}); err != nil {
		t.Errorf("a nil error became %v", err)
	}
	if _, ok := plain.(delivery.EffectSender); ok {
		t.Error("the wrapper of a destination without effects is an EffectSender")
	}
	if _, ok := delivery.Scrubbing(echoingEffects{}, echoed).(delivery.EffectSender); !ok {
		t.Error("the wrapper of an EffectSender is not one")
	}
	if s := fmt.Sprintf("%v %+v %#v %s", plain, plain, plain, plain); strings.Contains(s, echoed) {
		t.Errorf("printing the wrapper shows the credential: %s", s)
	}
}
