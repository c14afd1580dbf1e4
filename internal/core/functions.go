package core

import (
	"bytes"
	"encoding/json"
	"encoding/json/jsontext"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Field is one argument of a function. The JSON Schema in the catalogue and
// the validation of a call are both generated from it, so they cannot
// drift.
type Field struct {
	Name        string
	Description string
	Required    bool
	MinLen      int      // characters, after trimming when Trim is set
	MaxLen      int      // characters
	Trim        bool     // length counted after trimming white space
	NoControl   bool     // control characters refused
	Enum        []string // allowed values, when set
	Default     string   // documented default, when set
}

// Function is one tool AIVAX can call.
type Function struct {
	Name        string
	Description string
	Fields      []Field
	// Writes marks a function that goes through the operation key and so
	// needs metadata.request_id.
	Writes bool
	// schema is the JSON Schema generated from Fields when the catalogue
	// is built.
	schema json.RawMessage
}

// DefaultPriority is a ticket's priority when create_ticket got none: the
// schema's default, what get_ticket shows and what the helpdesk receives.
const DefaultPriority = "normal"

// Function names.
const (
	CreateTicket = "create_ticket"
	GetTicket    = "get_ticket"
)

// catalogue is every function, in the order GET /functions lists it, each
// with its schema generated once, when the program starts: a definition the
// generator cannot express stops the program then, never a request.
var catalogue = mustCatalogue([]Function{
	{
		Name: CreateTicket,
		Description: "Create a support ticket for the user. Call it once per ticket the user asked for. " +
			"If a call times out or fails, calling again with the same arguments is safe: " +
			"the same request returns the same ticket_id with deduplicated: true instead of a second ticket.",
		Writes: true,
		Fields: []Field{
			{Name: "title", Description: "A short summary of the problem, 1 to 200 characters.",
				Required: true, MinLen: 1, MaxLen: 200, Trim: true, NoControl: true},
			{Name: "description", Description: "Details of the problem, at most 4000 characters.", MaxLen: 4000},
			{Name: "priority", Description: "How urgent the problem is; normal when absent.",
				Enum: []string{"low", DefaultPriority, "high", "urgent"}, Default: DefaultPriority},
		},
	},
	{
		Name:        GetTicket,
		Description: "Read a ticket of the user's organisation by its ticket_id, as returned by create_ticket. It changes nothing.",
		Fields: []Field{
			{Name: "ticket_id", Description: "The ticket_id that create_ticket returned.",
				Required: true, MinLen: 1, MaxLen: 100, Trim: true, NoControl: true},
		},
	},
})

// mustCatalogue generates the schema of each function of fns.
func mustCatalogue(fns []Function) []Function {
	for i := range fns {
		s, err := fns[i].buildSchema()
		if err != nil {
			panic("core: catalogue: " + err.Error())
		}
		fns[i].schema = s
	}
	return fns
}

// Functions returns the catalogue, in the order GET /functions lists it.
// The slice is the caller's; the functions in it share their fields with
// the catalogue and are read-only.
func Functions() []Function { return slices.Clone(catalogue) }

// LookupFunction finds a function of the catalogue by name. The function
// is the catalogue's own, read-only.
func LookupFunction(name string) (*Function, bool) {
	for i := range catalogue {
		if catalogue[i].Name == name {
			return &catalogue[i], true
		}
	}
	return nil, false
}

// Args are a call's validated arguments; absent optional fields are absent.
type Args map[string]string

// Validate checks the arguments object against the function's fields, in
// one pass of the standard library's JSON tokenizer. The error message is
// written for the model: what is wrong and what to send. It never echoes a
// value. Duplicate member names are left to opkey.Canonical, which refuses
// them for every function.
func (f *Function) Validate(content []byte) (Args, error) {
	notObject := fmt.Errorf("the arguments of %s must be a JSON object", f.Name)
	dec := jsontext.NewDecoder(bytes.NewReader(content), jsontext.AllowDuplicateNames(true))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return nil, notObject
	}
	const (
		absent = iota // or null
		str
		other
	)
	kinds := make([]uint8, len(f.Fields))
	values := make([]string, len(f.Fields))
	for dec.PeekKind() != '}' {
		name, err := dec.ReadToken()
		if err != nil || name.Kind() != '"' {
			return nil, notObject
		}
		i := f.fieldIndex(name.String())
		if i < 0 {
			return nil, fmt.Errorf("%s takes no argument named %q; send only %s", f.Name, clip(name.String()), f.fieldList())
		}
		switch dec.PeekKind() {
		case 'n', '"':
			tok, err := dec.ReadToken()
			if err != nil {
				return nil, notObject
			}
			kinds[i], values[i] = absent, ""
			if tok.Kind() == '"' {
				kinds[i], values[i] = str, tok.String()
			}
		default:
			if err := dec.SkipValue(); err != nil {
				return nil, notObject
			}
			kinds[i] = other
		}
	}
	if _, err := dec.ReadToken(); err != nil { // the closing brace
		return nil, notObject
	}
	if _, err := dec.ReadToken(); !errors.Is(err, io.EOF) { // nothing after the object
		return nil, notObject
	}
	args := make(Args, len(f.Fields))
	for i := range f.Fields {
		fd := &f.Fields[i]
		switch kinds[i] {
		case absent:
			if fd.Required {
				return nil, fmt.Errorf("%s needs %s: %s", f.Name, fd.Name, fd.Description)
			}
			continue
		case other:
			return nil, fmt.Errorf("%s must be a string", fd.Name)
		}
		if err := fd.check(values[i]); err != nil {
			return nil, err
		}
		args[fd.Name] = values[i]
	}
	return args, nil
}

func (fd *Field) check(v string) error {
	if !utf8.ValidString(v) {
		return fmt.Errorf("%s must be valid Unicode text", fd.Name)
	}
	counted := v
	if fd.Trim {
		counted = TrimBlank(v)
	}
	n := utf8.RuneCountInString(counted)
	if n < fd.MinLen {
		return fmt.Errorf("%s must not be empty", fd.Name)
	}
	if fd.MaxLen > 0 && n > fd.MaxLen {
		return fmt.Errorf("%s is %d characters long; shorten it to at most %d", fd.Name, n, fd.MaxLen)
	}
	if fd.NoControl && strings.IndexFunc(v, unicode.IsControl) >= 0 {
		return fmt.Errorf("%s must not contain control characters such as line breaks or tabs", fd.Name)
	}
	if len(fd.Enum) > 0 {
		for _, e := range fd.Enum {
			if v == e {
				return nil
			}
		}
		return fmt.Errorf("%s must be one of %s", fd.Name, strings.Join(fd.Enum, ", "))
	}
	return nil
}

func (f *Function) fieldIndex(name string) int {
	for i := range f.Fields {
		if f.Fields[i].Name == name {
			return i
		}
	}
	return -1
}

func (f *Function) fieldList() string {
	names := make([]string, len(f.Fields))
	for i, fd := range f.Fields {
		names[i] = fd.Name
	}
	return strings.Join(names, ", ")
}

// clip bounds a name the caller chose before it goes into a message.
func clip(s string) string {
	const max = 40
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	r := []rune(s)
	return string(r[:max]) + "…"
}

// Schema is the JSON Schema (draft 2020-12) of the function's arguments,
// generated from the same fields Validate checks when the catalogue was
// built. The bytes are the caller's own.
func (f *Function) Schema() json.RawMessage { return bytes.Clone(f.schema) }

// buildSchema generates Schema, or says which field it cannot express.
func (f *Function) buildSchema() (json.RawMessage, error) {
	props := make(map[string]any, len(f.Fields))
	var required []string
	for _, fd := range f.Fields {
		p := map[string]any{"type": "string", "description": fd.Description}
		switch {
		case fd.Trim && fd.NoControl && fd.MinLen == 1 && fd.MaxLen >= 2:
			// Length counts after trimming, which minLength and maxLength
			// cannot say: the pattern carries both bounds. blankClass is
			// the white space of TrimBlank that is not a control character
			// (the control ones are refused anyway).
			p["pattern"] = fmt.Sprintf(`^%[1]s*[^%[2]s\p{Cc}](?:[^\p{Cc}]{0,%[3]d}[^%[2]s\p{Cc}])?%[1]s*$`,
				"["+blankClass+"]", blankClass, fd.MaxLen-2)
		case fd.Trim || fd.NoControl:
			// Trimmed or control-free lengths other than 1..n have no
			// pattern here yet.
			return nil, fmt.Errorf("%s: no JSON Schema for field %s", f.Name, fd.Name)
		default:
			if fd.MaxLen > 0 {
				p["maxLength"] = fd.MaxLen
			}
			if fd.MinLen > 0 {
				p["minLength"] = fd.MinLen
			}
		}
		if len(fd.Enum) > 0 {
			// enum applies to every type: an optional field, which Validate
			// accepts as null, needs null among its values too.
			enum := make([]any, 0, len(fd.Enum)+1)
			for _, e := range fd.Enum {
				enum = append(enum, e)
			}
			if !fd.Required {
				enum = append(enum, nil)
			}
			p["enum"] = enum
		}
		if fd.Default != "" {
			p["default"] = fd.Default
		}
		if !fd.Required {
			p["type"] = []string{"string", "null"}
		}
		props[fd.Name] = p
		if fd.Required {
			required = append(required, fd.Name)
		}
	}
	s := map[string]any{
		"$schema":              "https://json-schema.org/draft/2020-12/schema",
		"type":                 "object",
		"properties":           props,
		"additionalProperties": false,
	}
	if len(required) > 0 {
		s["required"] = required
	}
	return json.Marshal(s)
}
