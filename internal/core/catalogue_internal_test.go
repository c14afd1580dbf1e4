package core

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestCatalogueBuiltAtStart: every function of the catalogue carries its
// schema from the start, and a definition the schema generator cannot
// express is an error of the build (which stops the program at start),
// not a panic of a request.
func TestCatalogueBuiltAtStart(t *testing.T) {
	for _, f := range Functions() {
		var s map[string]any
		if err := json.Unmarshal(f.Schema(), &s); err != nil || s["type"] != "object" {
			t.Errorf("%s: schema %s (%v); want an object schema", f.Name, f.Schema(), err)
		}
	}
	bad := Function{Name: "bad", Fields: []Field{{Name: "code", Trim: true, MaxLen: 5}}, Read: getTicket}
	if _, err := bad.buildSchema(); err == nil || !strings.Contains(err.Error(), "code") {
		t.Errorf("buildSchema of an inexpressible field: %v; want an error naming it", err)
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "bad") {
			t.Errorf("mustCatalogue of an inexpressible definition: recovered %v; want a panic naming it", r)
		}
	}()
	register(bad)
}

// TestCatalogueCannotBeChanged: what Functions and Schema return are the
// caller's copies; changing them changes no later answer.
func TestCatalogueCannotBeChanged(t *testing.T) {
	fns := Functions()
	first := fns[0].Name
	fns[0].Name = "changed"
	_ = append(fns[:0], Function{Name: "added"})
	schema := fns[1].Schema()
	before := string(schema)
	for i := range schema {
		schema[i] = ' '
	}
	again := Functions()
	if again[0].Name != first || again[1].Name == "added" {
		t.Errorf("catalogue changed through Functions: %q, %q", again[0].Name, again[1].Name)
	}
	if got := string(again[1].Schema()); got != before {
		t.Errorf("schema changed through Schema:\n got %s\nwant %s", got, before)
	}
	if _, ok := LookupFunction(first); !ok {
		t.Errorf("LookupFunction(%q) no longer finds it", first)
	}
}
