package nonce_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/aivax-examples/idempotent-callback/internal/nonce"
)

// TestSettingsCheckAndSetDefaults: zero costs become the defaults (4..10),
// and each refused setting is a SettingError naming its field.
func TestSettingsCheckAndSetDefaults(t *testing.T) {
	s := nonce.Settings{HookKey: strings.Repeat("k", nonce.MaxKeyLen)}
	if err := s.CheckAndSetDefaults(); err != nil || s.MinCost != 4 || s.MaxCost != 10 {
		t.Fatalf("defaults %d..%d, %v; want 4..10", s.MinCost, s.MaxCost, err)
	}
	for _, tc := range []struct {
		s     nonce.Settings
		field string
	}{
		{nonce.Settings{HookKey: strings.Repeat("k", nonce.MaxKeyLen+1)}, nonce.FieldHookKey},
		{nonce.Settings{MinCost: 3}, nonce.FieldMinCost},
		{nonce.Settings{MaxCost: nonce.CapCost + 1}, nonce.FieldMaxCost},
		{nonce.Settings{MinCost: 11, MaxCost: 10}, nonce.FieldMinCost},
	} {
		err := tc.s.CheckAndSetDefaults()
		var se *nonce.SettingError
		if !errors.As(err, &se) || se.Field != tc.field {
			t.Errorf("%+v: %v; want a SettingError on %s", tc.s, err, tc.field)
		}
	}
	if err := (&nonce.Settings{MinCost: 11, MaxCost: 10}).CheckAndSetDefaults(); !errors.Is(err, nonce.ErrCostOrder) {
		t.Errorf("11..10: %v; want ErrCostOrder", err)
	}
}
