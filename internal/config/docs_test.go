package config_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/aivax-examples/idempotent-callback/internal/config"
)

// configurationDoc is the configuration reference the tables are read
// from.
const configurationDoc = "../../docs/configuration.md"

// docEnvTable returns the rows of the configuration reference's table of
// environment variables under the section heading ("Lambda environment",
// "Delivery environment"): the names of each row and its default cell.
func docEnvTable(t *testing.T, heading string) [][2]string {
	t.Helper()
	b, err := os.ReadFile(configurationDoc)
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "\n## "+heading+"\n")
	if !ok {
		t.Fatalf(`%s has no %q section`, configurationDoc, heading)
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
		t.Fatalf("%s: the %s table has no rows", configurationDoc, heading)
	}
	return rows
}

var (
	backticked = regexp.MustCompile("`([^`]*)`")
	// defaultValue is one default as the reference writes it: in backticks,
	// or a bare number.
	defaultValue = regexp.MustCompile("^(`[^`]+`|[0-9]+)$")
)

// TestDocStatesTheDefaults: each default the configuration reference's
// tables state is the one the code applies (setting a variable to it
// changes nothing: the same configuration in effect, see effective),
// TABLE_NAME is required, and every variable FromEnv reads has a row.
func TestDocStatesTheDefaults(t *testing.T) {
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
	for _, row := range docEnvTable(t, "Lambda environment") {
		var names []string
		for _, m := range backticked.FindAllStringSubmatch(row[0], -1) {
			names = append(names, m[1])
			listed[m[1]] = true
		}
		cell := row[1]
		if cell == "required" {
			for _, name := range names {
				if _, err := config.FromEnv(lookup(map[string]string{})); err == nil || !strings.Contains(err.Error(), name) {
					t.Errorf("docs/configuration.md: %s is required, but FromEnv without it says %v", name, err)
				}
			}
			continue
		}
		values := strings.Split(cell, ", ")
		if cell == "" || !defaultValue.MatchString(values[0]) {
			continue // no default, or one described in words
		}
		if len(values) != len(names) {
			t.Errorf("docs/configuration.md row %v: %d defaults %q for %d variables", names, len(values), cell, len(names))
			continue
		}
		for i, name := range names {
			v := strings.Trim(values[i], "`")
			if !ours[name] || !defaultValue.MatchString(values[i]) {
				t.Errorf("docs/configuration.md row %s: default %q is not a value of one of our settings", name, values[i])
				continue
			}
			vars := map[string]string{"TABLE_NAME": "tickets", name: v}
			got, err := checkedEnv(vars)
			if err != nil {
				t.Errorf("docs/configuration.md says %s defaults to %s, which the code refuses: %v", name, v, err)
			} else if got = effective(t, got); got != want {
				t.Errorf("docs/configuration.md says %s defaults to %s, but the code's default differs:\n %s=%s: %+v\n default: %+v", name, v, name, v, got, want)
			}
			checked++
		}
	}
	delivery := map[string]bool{}
	for _, row := range docEnvTable(t, "Delivery environment") { // DELIVERY_KIND's row
		for _, m := range backticked.FindAllStringSubmatch(row[0], -1) {
			listed[m[1]], delivery[m[1]] = true, true
		}
	}
	for _, name := range config.DeliveryEnvNames() {
		if !delivery[name] && !listed[name] {
			t.Errorf("docs/configuration.md's environment tables have no row for %s, which the delivery function reads", name)
		}
	}
	for name := range ours {
		if !listed[name] {
			t.Errorf("docs/configuration.md's Lambda (or Delivery) environment table has no row for %s", name)
		}
	}
	if checked < 7 {
		t.Errorf("checked %d stated defaults; the table states at least 7", checked)
	}
}

// jsonBlocks returns the ```json blocks of the markdown file name.
func jsonBlocks(t *testing.T, name string) []string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	for _, part := range strings.Split(string(b), "```json\n")[1:] {
		block, _, ok := strings.Cut(part, "\n```")
		if !ok {
			t.Fatalf("%s: a json block is not closed", name)
		}
		blocks = append(blocks, block)
	}
	return blocks
}

// placeholders stand for what a reader fills in; the examples are parsed
// with values of the same kind in their place.
var placeholders = strings.NewReplacer(`"whsec_…"`, `"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"`, `"lin_api_…"`, `"lin_api_example"`, `"…"`, `"example"`)

// TestDocsConfigurationExamples: every example of the local server's
// configuration file the docs show, a whole file or one of its blocks
// ("delivery", "mcp"), is one ParseFile accepts: its names are the
// file's, its values of the right types and within their rules.
func TestDocsConfigurationExamples(t *testing.T) {
	names, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, name := range append(names, "../../README.md") {
		for _, block := range jsonBlocks(t, name) {
			var files []string
			switch {
			case strings.HasPrefix(block, `{"listen"`):
				files = append(files, block)
			case strings.HasPrefix(block, `"delivery":`), strings.HasPrefix(block, `"mcp":`):
				// One member per line that starts at the margin.
				var member []string
				for _, line := range strings.Split(block, "\n") {
					if strings.HasPrefix(line, `"`) && len(member) > 0 {
						files = append(files, "{"+strings.Join(member, "\n")+"}")
						member = nil
					}
					member = append(member, line)
				}
				files = append(files, "{"+strings.Join(member, "\n")+"}")
			}
			for _, f := range files {
				if _, err := config.ParseFile([]byte(placeholders.Replace(f))); err != nil {
					t.Errorf("%s: the example\n%s\nis not a configuration the server accepts: %v", name, f, err)
				}
				checked++
			}
		}
	}
	if checked < 6 {
		t.Errorf("checked %d configuration examples; the docs show at least 6", checked)
	}
}
