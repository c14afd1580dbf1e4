package config

import (
	"strings"
	"testing"
)

// TestSettingsTable: every shared setting has a file name that is its
// environment name in lower case, no two settings share a name, and a bad
// value of each one, alone, is an error that starts by naming that setting
// (in the environment and in the file), so no entry reads one setting and
// reports another.
func TestSettingsTable(t *testing.T) {
	bad := map[string]string{ // a refused value of each shared setting, as file JSON
		"RETENTION":      `"soon"`,
		"MAX_BODY_BYTES": `1`,
		"PUBLIC_URL":     `"ftp://example.org"`,
	}
	// Read here, checked by the package that applies them
	// (doors.CheckSettings; TestCheckedSettingsTable).
	checkedElsewhere := map[string]bool{"KEY_POLICY": true, "NONCE_MIN_COST": true, "NONCE_MAX_COST": true}
	seen := map[string]bool{}
	for _, s := range lambdaSettings {
		if seen[s.env] || s.file != "" {
			t.Errorf("lambda setting %q: repeated, or has a file name %q", s.env, s.file)
		}
		seen[s.env] = true
	}
	for _, s := range commonSettings {
		if s.file != strings.ToLower(s.env) {
			t.Errorf("setting %s is %q in the file; want %q", s.env, s.file, strings.ToLower(s.env))
		}
		if seen[s.env] {
			t.Errorf("setting %s listed twice", s.env)
		}
		seen[s.env] = true
		if checkedElsewhere[s.env] {
			continue // TestCheckedSettingsTable
		}
		v, ok := bad[s.env]
		if !ok {
			t.Errorf("no refused value for %s: add one here", s.env)
			continue
		}
		_, err := FromEnv(env(map[string]string{"TABLE_NAME": "tickets", s.env: strings.Trim(v, `"`)}))
		if err == nil || !strings.HasPrefix(err.Error(), "config: "+s.env+": ") {
			t.Errorf("%s=%s: %v; want an error naming %s", s.env, v, err, s.env)
		}
		_, err = ParseFile([]byte(`{"` + s.file + `":` + v + `}`))
		if err == nil || !strings.HasPrefix(err.Error(), "config: "+s.file+": ") {
			t.Errorf("%s %s: %v; want an error naming %s", s.file, v, err, s.file)
		}
	}
}

// TestParseFileMemberTypes: a shared member of the wrong JSON type is an
// error naming it; a number may be written as a string holding one, and
// null is the default.
func TestParseFileMemberTypes(t *testing.T) {
	for file, want := range map[string]string{
		`{"retention":5}`:                    "config: retention: ",
		`{"key_policy":["request"]}`:         "config: key_policy: ",
		`{"max_body_bytes":"many"}`:          "config: max_body_bytes: ",
		`{"nonce_max_cost":true}`:            "config: nonce_max_cost: ",
		`{"Retention":"1h"}`:                 `unknown field "Retention"`,
		`[]`:                                 "JSON object",
		`{"listen":"127.0.0.1:1"} [{"x":1}]`: "JSON object",
	} {
		if _, err := ParseFile([]byte(file)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want an error containing %q", file, err, want)
		}
	}
	c, err := ParseFile([]byte(`{"max_body_bytes":"2048","retention":null}`))
	if err != nil || c.MaxBodyBytes != 2048 || c.Retention != DefaultRetention {
		t.Errorf("got %d, %s, %v; want 2048 and the default retention", c.MaxBodyBytes, c.Retention, err)
	}
}
