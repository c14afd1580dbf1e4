package nonce

import (
	"cmp"
	"errors"
	"fmt"
)

// Settings are a Verifier's settings as configured: the hook key and the
// accepted cost range, a zero cost meaning DefaultMinCost or
// DefaultMaxCost. This package owns their bounds and defaults; a
// configuration reads the values and names them in errors.
type Settings struct {
	HookKey          string
	MinCost, MaxCost int
}

// The fields of Settings, as SettingError names them.
const (
	FieldHookKey = "HookKey"
	FieldMinCost = "MinCost"
	FieldMaxCost = "MaxCost"
)

// ErrCostOrder is the error of a minimum cost above the maximum cost.
var ErrCostOrder = errors.New("the minimum cost is above the maximum cost")

// SettingError is a setting CheckAndSetDefaults refused: Field (one of the
// Field constants) names it, and Err, which does not name it, says why.
type SettingError struct {
	Field string
	Err   error
}

func (e *SettingError) Error() string { return e.Field + ": " + e.Err.Error() }

func (e *SettingError) Unwrap() error { return e.Err }

// CheckAndSetDefaults sets the zero costs to their defaults, then checks
// the settings: a key BCrypt uses whole (at most MaxKeyLen bytes; empty is
// allowed here, New refuses it), each cost from MinCost to CapCost, and
// the minimum not above the maximum.
func (s *Settings) CheckAndSetDefaults() error {
	if err := CheckKey(s.HookKey); err != nil {
		return &SettingError{FieldHookKey, err}
	}
	s.MinCost = cmp.Or(s.MinCost, DefaultMinCost)
	s.MaxCost = cmp.Or(s.MaxCost, DefaultMaxCost)
	for _, c := range []struct {
		field string
		cost  int
	}{{FieldMinCost, s.MinCost}, {FieldMaxCost, s.MaxCost}} {
		if c.cost < MinCost || c.cost > CapCost {
			return &SettingError{c.field, fmt.Errorf("%q is not an integer from %d to %d", fmt.Sprint(c.cost), MinCost, CapCost)}
		}
	}
	if s.MinCost > s.MaxCost {
		return &SettingError{FieldMinCost, fmt.Errorf("%d, maximum %d: %w", s.MinCost, s.MaxCost, ErrCostOrder)}
	}
	return nil
}

// CheckKey checks a hook key alone, as CheckAndSetDefaults does: one
// BCrypt uses whole (at most MaxKeyLen bytes; empty is allowed here, New
// refuses it). A key read after the other settings (from SSM) is checked
// with it.
func CheckKey(hookKey string) error {
	if len(hookKey) > MaxKeyLen {
		return fmt.Errorf("the hook key is %d bytes; BCrypt uses at most %d", len(hookKey), MaxKeyLen)
	}
	return nil
}
