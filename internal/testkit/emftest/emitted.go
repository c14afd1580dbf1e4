package emftest

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/metrics"
)

// Emitted drives a new metrics.EMF with the labels cl and dl through
// every kind of line it writes, reads each line back with Parse as
// CloudWatch would, and returns each metric's dimension sets (names
// sorted). The lines: a callback of every shape (door, function, outcome
// and code each present or not, with and without store calls, cold and
// warm), a delivery step of every state, the waiting gauge, and a failed
// read-ahead of every class. A line carries the members its dimensions
// name as the product's lines do: the callback's door, function, outcome
// and code are the door's own members; the recorder writes the others.
func Emitted(cl metrics.CallbackLabels, dl metrics.DeliveryLabels) (map[string][][]string, error) {
	if len(cl.Functions) == 0 || len(cl.Outcomes) == 0 || len(cl.Codes) == 0 || len(dl.States) == 0 {
		return nil, fmt.Errorf("emftest: every closed set needs a value: %+v %+v", cl, dl)
	}
	out := map[string][][]string{}
	emit := func(ctx context.Context, attrs ...slog.Attr) error {
		var b bytes.Buffer
		slog.New(slog.NewJSONHandler(&b, nil)).LogAttrs(ctx, slog.LevelInfo, "line", attrs...)
		data, err := Parse(b.Bytes())
		if err != nil {
			return fmt.Errorf("emftest: %s: %w", b.Bytes(), err)
		}
		if len(data) == 0 {
			return fmt.Errorf("emftest: a line without metrics: %s", b.Bytes())
		}
		for _, d := range data {
			set := make([]string, 0, len(d.Dimensions))
			for n := range d.Dimensions {
				set = append(set, n)
			}
			sort.Strings(set)
			if !slices.ContainsFunc(out[d.Name], func(s []string) bool { return slices.Equal(s, set) }) {
				out[d.Name] = append(out[d.Name], set)
			}
		}
		return nil
	}
	ctx := context.Background()
	for _, door := range append([]string{""}, metrics.Doors...) {
		for _, fn := range []string{"", "not_a_function", cl.Functions[0]} {
			for _, outcome := range []string{"not_an_outcome", cl.Outcomes[0]} {
				for _, code := range []string{"", cl.Codes[0]} {
					for _, store := range []bool{false, true} {
						r := &metrics.EMF{CallbackLabels: cl, DeliveryLabels: dl}
						for range 2 { // the process's first request, then a warm one
							c := metrics.Callback{Door: door, Function: fn, Outcome: outcome, Code: code, Duration: time.Millisecond}
							ctx := ctx
							if store {
								ctx, _ = metrics.WithRequest(ctx)
								r.StoreCall(ctx, time.Millisecond)
							}
							attrs := []slog.Attr{r.Callback(ctx, c)}
							for _, m := range []struct{ name, value string }{
								{metrics.LabelDoor, door}, {metrics.LabelFunction, fn},
								{metrics.LabelOutcome, outcome}, {metrics.LabelCode, code},
							} {
								if m.value != "" {
									attrs = append(attrs, slog.String(m.name, m.value))
								}
							}
							if err := emit(ctx, attrs...); err != nil {
								return nil, err
							}
						}
					}
				}
			}
		}
	}
	r := &metrics.EMF{CallbackLabels: cl, DeliveryLabels: dl}
	for _, s := range dl.States {
		if err := emit(ctx, r.Delivery(ctx, metrics.DeliveryStep{State: s, Lag: time.Second})); err != nil {
			return nil, err
		}
	}
	if err := emit(ctx, r.TicketsWaiting(ctx, 1)); err != nil {
		return nil, err
	}
	for _, class := range metrics.ReadAheadClasses {
		if err := emit(ctx, r.ReadAheadError(ctx, class)); err != nil {
			return nil, err
		}
	}
	return out, nil
}
