package config_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/aivax-examples/idempotent-callback/internal/config"
)

// readmeEnvTable returns the rows of the README's table of environment
// variables under heading ("Lambda environment", "Delivery environment"):
// the names of each row and its default cell.
func readmeEnvTable(t *testing.T, heading string) [][2]string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "\n"+heading)
	if !ok {
		t.Fatalf(`README.md has no %q table`, heading)
	}
	var rows [][2]string
	inTable := false
	for _, line := range strings.Split(after, "\n") {
		if !strings.HasPrefix(line, "|") {
			if inTable {
				break
			}
			continue
		}
		inTable = true
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 3 || !strings.HasPrefix(strings.TrimSpace(cells[0]), "`") {
			continue // the header and its rule
		}
		rows = append(rows, [2]string{cells[0], strings.TrimSpace(cells[2])})
	}
	if len(rows) == 0 {
		t.Fatalf("README.md: the %s table has no rows", heading)
	}
	return rows
}

var (
	backticked = regexp.MustCompile("`([^`]*)`")
	// defaultValue is one default as the README writes it: in backticks,
	// or a bare number.
	defaultValue = regexp.MustCompile("^(`[^`]+`|[0-9]+)$")
)

// TestReadmeStatesTheDefaults: each default the README's configuration
// table states is the one the code applies (setting a variable to it
// changes nothing: the same configuration in effect, see effective),
// TABLE_NAME is required, and every variable FromEnv reads has a row.
func TestReadmeStatesTheDefaults(t *testing.T) {
	minimal := map[string]string{"TABLE_NAME": "tickets"}
	want, err := config.FromEnv(lookup(minimal))
	if err != nil {
		t.Fatal(err)
	}
	want = effective(t, want)
	ours := map[string]bool{}
	for _, name := range config.EnvNames() {
		ours[name] = true
	}
	listed := map[string]bool{}
	checked := 0
	for _, row := range readmeEnvTable(t, "Lambda environment") {
		var names []string
		for _, m := range backticked.FindAllStringSubmatch(row[0], -1) {
			names = append(names, m[1])
			listed[m[1]] = true
		}
		cell := row[1]
		if cell == "required" {
			for _, name := range names {
				if _, err := config.FromEnv(lookup(map[string]string{})); err == nil || !strings.Contains(err.Error(), name) {
					t.Errorf("README: %s is required, but FromEnv without it says %v", name, err)
				}
			}
			continue
		}
		values := strings.Split(cell, ", ")
		if cell == "" || !defaultValue.MatchString(values[0]) {
			continue // no default, or one described in words
		}
		if len(values) != len(names) {
			t.Errorf("README row %v: %d defaults %q for %d variables", names, len(values), cell, len(names))
			continue
		}
		for i, name := range names {
			v := strings.Trim(values[i], "`")
			if !ours[name] || !defaultValue.MatchString(values[i]) {
				t.Errorf("README row %s: default %q is not a value of one of our settings", name, values[i])
				continue
			}
			vars := map[string]string{"TABLE_NAME": "tickets", name: v}
			got, err := checkedEnv(vars)
			if err != nil {
				t.Errorf("README says %s defaults to %s, which the code refuses: %v", name, v, err)
			} else if got = effective(t, got); got != want {
				t.Errorf("README says %s defaults to %s, but the code's default differs:\n %s=%s: %+v\n default: %+v", name, v, name, v, got, want)
			}
			checked++
		}
	}
	delivery := map[string]bool{}
	for _, row := range readmeEnvTable(t, "Delivery environment") { // DELIVERY_KIND's row
		for _, m := range backticked.FindAllStringSubmatch(row[0], -1) {
			listed[m[1]], delivery[m[1]] = true, true
		}
	}
	for _, name := range config.DeliveryEnvNames() {
		if !delivery[name] && !listed[name] {
			t.Errorf("README's environment tables have no row for %s, which the delivery function reads", name)
		}
	}
	for name := range ours {
		if !listed[name] {
			t.Errorf("README's Lambda (or Delivery) environment table has no row for %s", name)
		}
	}
	if checked < 7 {
		t.Errorf("checked %d stated defaults; the table states at least 7", checked)
	}
}
