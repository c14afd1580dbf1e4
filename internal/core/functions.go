package core

import (
	"encoding/json"
	"fmt"
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
}

// Function names.
const (
	CreateTicket = "create_ticket"
	GetTicket    = "get_ticket"
)

// Functions is the catalogue, in the order GET /functions lists it.
var Functions = []Function{
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
				Enum: []string{"low", "normal", "high", "urgent"}, Default: "normal"},
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
}

// LookupFunction finds a function of the catalogue by name.
func LookupFunction(name string) (*Function, bool) {
	for i := range Functions {
		if Functions[i].Name == name {
			return &Functions[i], true
		}
	}
	return nil, false
}

// Args are a call's validated arguments; absent optional fields are absent.
type Args map[string]string

// Validate checks the arguments object against the function's fields. The
// error message is written for the model: what is wrong and what to send.
// It never echoes the value.
func (f *Function) Validate(content []byte) (Args, error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(content, &members); err != nil || members == nil {
		return nil, fmt.Errorf("the arguments of %s must be a JSON object", f.Name)
	}
	for name := range members {
		if f.field(name) == nil {
			return nil, fmt.Errorf("%s takes no argument named %q; send only %s", f.Name, clip(name), f.fieldList())
		}
	}
	args := make(Args, len(f.Fields))
	for i := range f.Fields {
		fd := &f.Fields[i]
		raw, ok := members[fd.Name]
		if !ok || string(raw) == "null" {
			if fd.Required {
				return nil, fmt.Errorf("%s needs %s: %s", f.Name, fd.Name, fd.Description)
			}
			continue
		}
		var v string
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, fmt.Errorf("%s must be a string", fd.Name)
		}
		if err := fd.check(v); err != nil {
			return nil, err
		}
		args[fd.Name] = v
	}
	return args, nil
}

// ValidateCanonical is Validate for arguments that opkey.Canonical has
// accepted, given as its RFC 8785 text: it answers exactly what Validate
// answers for the original bytes (the text has the same members and
// values, no duplicate names and only valid UTF-8), from one pass over the
// compact text instead of a second JSON decode. When several members are
// unknown it names the first in canonical order, where Validate names any
// one of them.
func (f *Function) ValidateCanonical(canonical string) (Args, error) {
	const maxFields = 8
	if len(f.Fields) > maxFields {
		return f.Validate([]byte(canonical))
	}
	// What each field of f holds: 0 absent or null, 1 a string (in
	// values), 2 anything else.
	var kinds [maxFields]uint8
	var values [maxFields]string
	p := canonicalObject{s: canonical, i: 1}
	if len(canonical) < 2 || canonical[0] != '{' {
		return f.Validate([]byte(canonical))
	}
	for !p.done() {
		name, ok := p.str()
		if !ok || !p.colon() {
			return f.Validate([]byte(canonical))
		}
		idx := f.fieldIndex(name)
		if idx < 0 {
			return nil, fmt.Errorf("%s takes no argument named %q; send only %s", f.Name, clip(name), f.fieldList())
		}
		switch p.peek() {
		case '"':
			if values[idx], ok = p.str(); !ok {
				return f.Validate([]byte(canonical))
			}
			kinds[idx] = 1
		case 'n':
			p.skip()
			kinds[idx] = 0
		default:
			p.skip()
			kinds[idx] = 2
		}
		if !p.comma() {
			return f.Validate([]byte(canonical))
		}
	}
	args := make(Args, len(f.Fields))
	for i := range f.Fields {
		fd := &f.Fields[i]
		switch kinds[i] {
		case 0:
			if fd.Required {
				return nil, fmt.Errorf("%s needs %s: %s", f.Name, fd.Name, fd.Description)
			}
			continue
		case 2:
			return nil, fmt.Errorf("%s must be a string", fd.Name)
		}
		if err := fd.check(values[i]); err != nil {
			return nil, err
		}
		args[fd.Name] = values[i]
	}
	return args, nil
}

// canonicalObject walks the members of an RFC 8785 object text: compact,
// valid JSON whose strings escape only '"', '\\' and control characters.
// Anything unexpected reports !ok, and the caller falls back to Validate.
type canonicalObject struct {
	s string
	i int
}

func (p *canonicalObject) done() bool { return p.i >= len(p.s) || p.s[p.i] == '}' }

func (p *canonicalObject) peek() byte {
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *canonicalObject) colon() bool {
	if p.peek() != ':' {
		return false
	}
	p.i++
	return true
}

// comma consumes the ',' between members, or accepts the closing '}'.
func (p *canonicalObject) comma() bool {
	switch p.peek() {
	case ',':
		p.i++
		return p.peek() == '"'
	case '}':
		return true
	}
	return false
}

// str reads a string at p.i and returns its value; without escapes it is a
// substring of the text, so it costs no allocation.
func (p *canonicalObject) str() (string, bool) {
	if p.peek() != '"' {
		return "", false
	}
	start := p.i + 1
	escaped := false
	for j := start; j < len(p.s); j++ {
		switch p.s[j] {
		case '\\':
			escaped = true
			j++
		case '"':
			p.i = j + 1
			if !escaped {
				return p.s[start:j], true
			}
			return unescape(p.s[start:j])
		}
	}
	return "", false
}

// unescape decodes the escapes RFC 8785 writes: \" \\ \b \f \n \r \t and
// \u00XX.
func unescape(s string) (string, bool) {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			b = append(b, c)
			continue
		}
		if i+1 >= len(s) {
			return "", false
		}
		i++
		switch s[i] {
		case '"', '\\', '/':
			b = append(b, s[i])
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			if i+4 >= len(s) || s[i+1] != '0' || s[i+2] != '0' {
				return "", false
			}
			hi, lo := unhex(s[i+3]), unhex(s[i+4])
			if hi > 1 || lo > 15 {
				return "", false
			}
			b = append(b, hi<<4|lo)
			i += 4
		default:
			return "", false
		}
	}
	return string(b), true
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10
	}
	return 255
}

// skip moves past the value at p.i: a literal, a number, a string, an
// array or an object (strings inside are skipped whole).
func (p *canonicalObject) skip() {
	depth := 0
	for p.i < len(p.s) {
		switch c := p.s[p.i]; c {
		case '"':
			if _, ok := p.str(); !ok {
				p.i = len(p.s)
				return
			}
			if depth == 0 {
				return
			}
			continue
		case '[', '{':
			depth++
		case ']', '}':
			if depth == 0 {
				return
			}
			depth--
			if depth == 0 {
				p.i++
				return
			}
		case ',':
			if depth == 0 {
				return
			}
		}
		p.i++
	}
}

func (fd *Field) check(v string) error {
	if !utf8.ValidString(v) {
		return fmt.Errorf("%s must be valid Unicode text", fd.Name)
	}
	counted := v
	if fd.Trim {
		counted = strings.TrimSpace(v)
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

func (f *Function) field(name string) *Field {
	if i := f.fieldIndex(name); i >= 0 {
		return &f.Fields[i]
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
// generated from the same fields Validate checks.
func (f *Function) Schema() map[string]any {
	props := make(map[string]any, len(f.Fields))
	var required []string
	for _, fd := range f.Fields {
		p := map[string]any{"type": "string", "description": fd.Description}
		switch {
		case fd.Trim && fd.NoControl && fd.MinLen == 1 && fd.MaxLen >= 2:
			// Length counts after trimming, which minLength and maxLength
			// cannot say: the pattern carries both bounds. \p{Z} is the
			// white space that is not a control character.
			p["pattern"] = fmt.Sprintf(`^\p{Z}*[^\p{Z}\p{Cc}](?:[^\p{Cc}]{0,%d}[^\p{Z}\p{Cc}])?\p{Z}*$`, fd.MaxLen-2)
		case fd.Trim || fd.NoControl:
			panic("core: no schema for field " + fd.Name) // a definition the generator cannot express
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
	return s
}
