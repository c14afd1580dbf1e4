package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
)

// samOverrides reads the parameter_overrides of samconfig.toml's deploy
// section (one TOML basic string of Name="value" pairs, as sam deploy
// writes it) and the comment lines of the file.
func samOverrides(t *testing.T, text string) (map[string]string, []string) {
	t.Helper()
	var comments []string
	var raw string
	found := false
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "#") {
			comments = append(comments, strings.TrimSpace(strings.TrimPrefix(line, "#")))
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		if !ok || strings.TrimSpace(name) != "parameter_overrides" {
			continue
		}
		s, err := strconv.Unquote(strings.TrimSpace(value))
		if err != nil {
			t.Fatalf("samconfig.toml: parameter_overrides is not one quoted string: %v", err)
		}
		raw, found = s, true
	}
	overrides := map[string]string{}
	if !found {
		return overrides, comments
	}
	pair := regexp.MustCompile(`^\s*([A-Za-z0-9]+)=(?:"([^"]*)"|([^\s"]*))`)
	for rest := raw; strings.TrimSpace(rest) != ""; {
		m := pair.FindStringSubmatch(rest)
		if m == nil {
			t.Fatalf("samconfig.toml: parameter_overrides: %q is not Name=\"value\"", rest)
		}
		overrides[m[1]] = m[2] + m[3]
		rest = rest[len(m[0]):]
	}
	return overrides, comments
}

// Every parameter samconfig.toml overrides is one of the template's, and
// one whose value differs from the template's default says why, in a
// comment line "# Name: why". A "defaults, spelled out" line that is not
// the template's default would deploy without what the docs promise (the
// concurrency bound of the public URL, say).
func TestSamconfigOverridesAreTheTemplatesDefaultsOrSayWhy(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(t), "samconfig.toml"))
	if err != nil {
		t.Fatal(err)
	}
	overrides, comments := samOverrides(t, string(b))
	if len(overrides) == 0 {
		t.Fatal("samconfig.toml has no parameter_overrides; this test checks the shipped ones")
	}
	for _, problem := range unexplainedOverrides(testenv.Child(testenv.Template(t), "Parameters"), overrides, comments) {
		t.Error(problem)
	}
}

// unexplainedOverrides lists the overrides that are not parameters of the
// template, or differ from its default with no "# Name: why" comment.
func unexplainedOverrides(params *yaml.Node, overrides map[string]string, comments []string) []string {
	var problems []string
	for name, v := range overrides {
		p := testenv.Child(params, name)
		if p == nil {
			problems = append(problems, fmt.Sprintf("samconfig.toml overrides %s, which template.yaml does not declare", name))
			continue
		}
		def := value(p, "Default")
		if v == def {
			continue
		}
		explained := false
		for _, c := range comments {
			if why, ok := strings.CutPrefix(c, name+":"); ok && strings.TrimSpace(why) != "" {
				explained = true
			}
		}
		if !explained {
			problems = append(problems, fmt.Sprintf("samconfig.toml sets %s=%q, but the template's default is %q; say why in a comment line \"# %s: …\" or drop it", name, v, def, name))
		}
	}
	sort.Strings(problems)
	return problems
}

// The parser reads what sam deploy writes, and the check reports a value
// that differs from the template's default unless a comment says why:
// ReservedConcurrency="0" against the template's 10 unbounds the public URL.
func TestSamOverridesCheck(t *testing.T) {
	params := testenv.Child(testenv.Template(t), "Parameters")
	const line = "parameter_overrides = \"KeyPolicy=\\\"arguments\\\" ReservedConcurrency=\\\"0\\\" Nope=\\\"x y\\\"\"\n"
	got, comments := samOverrides(t, line)
	if len(got) != 3 || got["ReservedConcurrency"] != "0" || got["Nope"] != "x y" || len(comments) != 0 {
		t.Fatalf("overrides = %v, comments %q", got, comments)
	}
	problems := unexplainedOverrides(params, got, comments)
	if len(problems) != 2 || !strings.Contains(problems[0], "Nope") || !strings.Contains(problems[1], `ReservedConcurrency="0"`) {
		t.Fatalf("problems = %q, want the undeclared Nope and the unexplained ReservedConcurrency", problems)
	}
	got, comments = samOverrides(t, "# ReservedConcurrency: a test stack, no public traffic\n"+line)
	if problems := unexplainedOverrides(params, got, comments); len(problems) != 1 || !strings.Contains(problems[0], "Nope") {
		t.Fatalf("with a reason: problems = %q, want only Nope", problems)
	}
}
