package core_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/aivax-examples/idempotent-callback/internal/core"
)

// compileSchema compiles what GET /functions publishes for fn with a real
// JSON Schema 2020-12 validator (patterns run on Go's regexp, lengths
// count code points).
func compileSchema(t *testing.T, fn *core.Function) *jsonschema.Schema {
	t.Helper()
	raw, err := json.Marshal(fn.Schema())
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	url := "mem:///" + fn.Name + ".json"
	if err := c.AddResource(url, doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		t.Fatalf("%s schema does not compile: %v\n%s", fn.Name, err, raw)
	}
	return sch
}

// TestSchemaAgreesWithValidate: for each example, the published JSON
// Schema and Function.Validate (whose rules are those of docs/contract.md,
// Functions) give the
// same verdict, and that verdict is the expected one.
func TestSchemaAgreesWithValidate(t *testing.T) {
	r := strings.Repeat
	obj := func(members ...string) string { return "{" + strings.Join(members, ",") + "}" }
	m := func(name, value string) string { return q(name) + ":" + value }
	title := func(s string) string { return obj(m("title", q(s))) }
	type ex struct {
		name  string
		args  string
		valid bool
	}
	cases := map[string][]ex{
		core.CreateTicket: {
			{"title 1 char", title("x"), true},
			{"title 200 chars", title(r("t", 200)), true},
			{"title 200 astral chars", title(r("😂", 200)), true},
			{"title 200 chars inside spaces", title("   " + r("t", 200) + "  "), true},
			{"title 200 chars inside U+00A0/U+3000", title("\u00a0\u3000" + r("t", 200) + "\u3000\u00a0"), true},
			{"title 200 chars inside U+2028/U+2029", title("\u2028" + r("t", 200) + "\u2029"), true},
			{"title 1 char inside 300 spaces", title(r(" ", 150) + "x" + r(" ", 150)), true},
			{"title inner spaces 200", title("a" + r(" ", 198) + "b"), true},
			{"title inner U+3000 200", title("a" + r("\u3000", 198) + "b"), true},
			{"title U+3000 around", title("\u3000x\u3000"), true},
			{"title zero-width space only", title("\u200b"), true},
			{"title BOM only", title("\ufeff"), false},
			{"title U+180E only", title("\u180e"), true},
			{"title with <>&", title("<b>&</b>"), true},
			{"all fields", obj(m("title", `"t"`), m("description", `"d"`), m("priority", `"urgent"`)), true},
			{"description 4000 chars", obj(m("title", `"t"`), m("description", q(r("é", 4000)))), true},
			{"description with line breaks", obj(m("title", `"t"`), m("description", `"a\nb\tc\u0000"`)), true},
			{"description empty", obj(m("title", `"t"`), m("description", `""`)), true},
			{"description null", obj(m("title", `"t"`), m("description", `null`)), true},
			{"priority null", obj(m("title", `"t"`), m("priority", `null`)), true},
			{"priority low", obj(m("title", `"t"`), m("priority", `"low"`)), true},
			{"priority normal", obj(m("title", `"t"`), m("priority", `"normal"`)), true},
			{"priority high", obj(m("title", `"t"`), m("priority", `"high"`)), true},

			{"empty object", `{}`, false},
			{"title null", obj(m("title", `null`)), false},
			{"title empty", title(""), false},
			{"title spaces only", title("   "), false},
			{"title U+00A0/U+3000 only", title("\u00a0\u3000"), false},
			{"title U+2028 only", title("\u2028"), false},
			{"title 201 chars", title(r("t", 201)), false},
			{"title 201 astral chars", title(r("😂", 201)), false},
			{"title 201 chars inside spaces", title("  " + r("t", 201) + "  "), false},
			{"title 201 chars inside U+3000", title("\u3000" + r("t", 201) + "\u3000"), false},
			{"title inner spaces 201", title("a" + r(" ", 199) + "b"), false},
			{"title newline inside", title("a\nb"), false},
			{"title newline at end", title("abc\n"), false},
			{"title tab at start", title("\tabc"), false},
			{"title NUL", title("a\x00b"), false},
			{"title DEL", title("a\x7fb"), false},
			{"title U+0085 inside", title("a\u0085b"), false},
			{"title U+0085 at start", title("\u0085abc"), false},
			{"title vertical tab", title("a\vb"), false},
			{"title number", obj(m("title", `1`)), false},
			{"title array", obj(m("title", `["t"]`)), false},
			{"description 4001 chars", obj(m("title", `"t"`), m("description", q(r("é", 4001)))), false},
			{"description number", obj(m("title", `"t"`), m("description", `1`)), false},
			{"priority unknown", obj(m("title", `"t"`), m("priority", `"critical"`)), false},
			{"priority empty", obj(m("title", `"t"`), m("priority", `""`)), false},
			{"priority number", obj(m("title", `"t"`), m("priority", `2`)), false},
			{"extra member", obj(m("title", `"t"`), m("assignee", `"bob"`)), false},
			{"extra member null", obj(m("title", `"t"`), m("assignee", `null`)), false},
			{"title in another case", obj(m("Title", `"t"`)), false},
			{"array", `[]`, false},
		},
		core.GetTicket: {
			{"ticket_id", obj(m("ticket_id", `"ticket-1"`)), true},
			{"ticket_id 100 chars", obj(m("ticket_id", q(r("i", 100)))), true},
			{"ticket_id inside spaces", obj(m("ticket_id", q("  id  "))), true},
			{"ticket_id 101 chars", obj(m("ticket_id", q(r("i", 101)))), false},
			{"ticket_id empty", obj(m("ticket_id", `""`)), false},
			{"ticket_id spaces", obj(m("ticket_id", `"  "`)), false},
			{"ticket_id newline", obj(m("ticket_id", `"a\nb"`)), false},
			{"ticket_id null", obj(m("ticket_id", `null`)), false},
			{"ticket_id number", obj(m("ticket_id", `1`)), false},
			{"no ticket_id", `{}`, false},
			{"extra member", obj(m("ticket_id", `"a"`), m("title", `"t"`)), false},
		},
		core.AddComment: {
			{"body 1 char", obj(m("ticket_id", `"t"`), m("body", `"x"`)), true},
			{"body 4000 chars inside spaces and lines", obj(m("ticket_id", `"t"`), m("body", q("\n  "+r("b", 4000)+"\t\n"))), true},
			{"body 4000 astral chars", obj(m("ticket_id", `"t"`), m("body", q(r("😂", 4000)))), true},
			{"body lines and tabs inside", obj(m("ticket_id", `"t"`), m("body", q("line 1\n\tline 2"))), true},
			{"body 4001 chars", obj(m("ticket_id", `"t"`), m("body", q(r("b", 4001)))), false},
			{"body blank", obj(m("ticket_id", `"t"`), m("body", q(" \n\t "))), false},
			{"body empty", obj(m("ticket_id", `"t"`), m("body", `""`)), false},
			{"body carriage return", obj(m("ticket_id", `"t"`), m("body", q("a\rb"))), false},
			{"body vertical tab", obj(m("ticket_id", `"t"`), m("body", q("a\vb"))), false},
			{"body U+0085", obj(m("ticket_id", `"t"`), m("body", q("a\u0085b"))), false},
			{"body null", obj(m("ticket_id", `"t"`), m("body", `null`)), false},
			{"no body", obj(m("ticket_id", `"t"`)), false},
			{"no ticket_id", obj(m("body", `"x"`)), false},
			{"extra member", obj(m("ticket_id", `"t"`), m("body", `"x"`), m("public", `true`)), false},
		},
		core.CloseTicket: {
			{"no resolution", obj(m("ticket_id", `"t"`)), true},
			{"resolution null", obj(m("ticket_id", `"t"`), m("resolution", `null`)), true},
			{"resolution empty", obj(m("ticket_id", `"t"`), m("resolution", `""`)), true},
			{"resolution blank", obj(m("ticket_id", `"t"`), m("resolution", q(" \n "))), true},
			{"resolution 1000 chars inside lines", obj(m("ticket_id", `"t"`), m("resolution", q("\n"+r("r", 1000)+"\n"))), true},
			{"resolution lines inside", obj(m("ticket_id", `"t"`), m("resolution", q("Reset.\n\tWorks now."))), true},
			{"resolution 1001 chars", obj(m("ticket_id", `"t"`), m("resolution", q(r("r", 1001)))), false},
			{"resolution control", obj(m("ticket_id", `"t"`), m("resolution", q("a\u0007b"))), false},
			{"resolution number", obj(m("ticket_id", `"t"`), m("resolution", `1`)), false},
			{"no ticket_id", obj(m("resolution", `"x"`)), false},
			{"extra member", obj(m("ticket_id", `"t"`), m("reopen", `false`)), false},
		},
	}
	fns := core.Functions()
	for i := range fns {
		fn := &fns[i]
		sch := compileSchema(t, fn)
		examples := cases[fn.Name]
		if len(examples) == 0 {
			t.Fatalf("no examples for %s", fn.Name)
		}
		for _, e := range examples {
			t.Run(fn.Name+"/"+e.name, func(t *testing.T) {
				_, verr := fn.Validate([]byte(e.args))
				inst, err := jsonschema.UnmarshalJSON(strings.NewReader(e.args))
				if err != nil {
					t.Fatal(err)
				}
				serr := sch.Validate(inst)
				if (verr == nil) != (serr == nil) {
					t.Fatalf("schema and Validate disagree on %s:\n Validate: %v\n schema:   %v", clip(e.args), verr, serr)
				}
				if (verr == nil) != e.valid {
					t.Fatalf("both say valid=%v for %s; want %v (Validate: %v)", verr == nil, clip(e.args), e.valid, verr)
				}
			})
		}
	}
}

// TestSchemaShape: what the catalogue tells AIVAX about each field.
func TestSchemaShape(t *testing.T) {
	fn, ok := core.LookupFunction(core.CreateTicket)
	if !ok {
		t.Fatal("create_ticket not in the catalogue")
	}
	raw, _ := json.Marshal(fn.Schema())
	var s struct {
		Type                 string                     `json:"type"`
		Required             []string                   `json:"required"`
		AdditionalProperties *bool                      `json:"additionalProperties"`
		Properties           map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	if s.Type != "object" || len(s.Required) != 1 || s.Required[0] != "title" ||
		s.AdditionalProperties == nil || *s.AdditionalProperties || len(s.Properties) != 3 {
		t.Fatalf("create_ticket schema: %s", raw)
	}
	var priority struct {
		Default string `json:"default"`
	}
	_ = json.Unmarshal(s.Properties["priority"], &priority)
	if priority.Default != "normal" {
		t.Fatalf("priority default %q; want normal", priority.Default)
	}
	if _, ok := core.LookupFunction("delete_ticket"); ok {
		t.Fatal("LookupFunction found a function that does not exist")
	}
}
