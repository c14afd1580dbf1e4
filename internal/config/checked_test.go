package config_test

import (
	"strings"
	"testing"

	"github.com/aivax-examples/idempotent-callback/internal/app/doors"
	"github.com/aivax-examples/idempotent-callback/internal/config"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/configtest"
)

// checkedEnv is what the callback function has at start: FromEnv, then
// the settings other packages own checked and defaulted by
// doors.CheckSettings, as functions/callback does; c.Common shows the
// checked values.
func checkedEnv(vars map[string]string) (config.Lambda, error) {
	c, err := config.FromEnv(configtest.Env(vars))
	if err == nil {
		c.Common, err = checkCommon(c.Common, c.HookKey, config.SettingEnvNames)
	}
	return c, err
}

// checkedFile is checkedEnv for the local file, as localserver does.
func checkedFile(file string) (config.Local, error) {
	c, err := config.ParseFile([]byte(file))
	if err == nil {
		c.Common, err = checkCommon(c.Common, c.HookKey, config.SettingFileNames)
	}
	return c, err
}

// checkCommon is c as doors.CheckSettings checks it: the key policy
// parsed and the nonce costs' defaults set.
func checkCommon(c config.Common, hookKey string, names config.SettingNames) (config.Common, error) {
	s, err := doors.CheckSettings(c, hookKey, names)
	if err != nil {
		return c, err
	}
	c.Policy, c.MinCost, c.MaxCost = string(s.Policy), s.MinCost, s.MaxCost
	return c, nil
}

// TestCheckedSettingsRefused: the settings whose rules belong to another
// package (opkey's key policies, nonce's key length and cost range) are
// refused at start with one line naming the setting as each
// configuration calls it.
func TestCheckedSettingsRefused(t *testing.T) {
	env := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"KEY_POLICY=both -> KEY_POLICY", map[string]string{"KEY_POLICY": "both"}, "KEY_POLICY"},
		{"KEY_POLICY=Request (case) -> KEY_POLICY", map[string]string{"KEY_POLICY": "Request"}, "KEY_POLICY"},
		{"HOOK_KEY of 73 bytes -> HOOK_KEY", map[string]string{"HOOK_KEY": strings.Repeat("k", 73)}, "HOOK_KEY"},
		{"NONCE_MIN_COST 10 > NONCE_MAX_COST 9 -> NONCE_MIN_COST", map[string]string{"NONCE_MIN_COST": "10", "NONCE_MAX_COST": "9"}, "NONCE_MIN_COST"},
		{"NONCE_MIN_COST=3 -> NONCE_MIN_COST", map[string]string{"NONCE_MIN_COST": "3"}, "NONCE_MIN_COST"},
		{"NONCE_MAX_COST=32 -> NONCE_MAX_COST", map[string]string{"NONCE_MAX_COST": "32"}, "NONCE_MAX_COST"},
	}
	for _, tc := range env {
		t.Run(tc.name, func(t *testing.T) {
			_, err := checkedEnv(tc.env)
			configtest.OneLine(t, err, tc.want)
		})
	}
	file := []struct {
		name string
		file string
		want []string
	}{
		{"hook_key of 73 bytes -> hook_key", `{"hook_key":"` + strings.Repeat("k", 73) + `"}`, []string{"hook_key"}},
		{"key_policy both -> key_policy", `{"key_policy":"both"}`, []string{"key_policy"}},
		{"nonce_min_cost > nonce_max_cost -> nonce_min_cost",
			`{"nonce_min_cost":11,"nonce_max_cost":10}`, []string{"nonce_min_cost", "nonce_max_cost"}},
	}
	for _, tc := range file {
		t.Run(tc.name, func(t *testing.T) {
			_, err := checkedFile(tc.file)
			configtest.OneLine(t, err, tc.want...)
		})
	}
}

// TestCheckedSettingsTable: a refused value of each shared setting another
// package checks is an error that starts by naming that setting, in the
// environment and in the file (TestSettingsTable holds the others).
func TestCheckedSettingsTable(t *testing.T) {
	bad := map[string]string{ // as file JSON
		"KEY_POLICY":     `"both"`,
		"HOOK_KEY":       `"` + strings.Repeat("k", 73) + `"`,
		"NONCE_MIN_COST": `3`,
		"NONCE_MAX_COST": `13`,
	}
	for name, v := range bad {
		_, err := checkedEnv(map[string]string{name: strings.Trim(v, `"`)})
		if err == nil || !strings.HasPrefix(err.Error(), "config: "+name+": ") {
			t.Errorf("%s=%s: %v; want an error naming %s", name, v, err, name)
		}
		file := strings.ToLower(name)
		_, err = checkedFile(`{"` + file + `":` + v + `}`)
		if err == nil || !strings.HasPrefix(err.Error(), "config: "+file+": ") {
			t.Errorf("%s %s: %v; want an error naming %s", file, v, err, file)
		}
	}
}
