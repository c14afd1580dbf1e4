package core

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/json/jsontext"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/aivax-examples/idempotent-callback/idem"
)

// Field is one argument of a function. The JSON Schema in the catalogue and
// the validation of a call are both generated from it, so they cannot
// drift.
type Field struct {
	Name        string
	Description string
	Required    bool
	MinLen      int  // characters, after trimming when Trim is set
	MaxLen      int  // characters
	Trim        bool // length counted after trimming white space
	NoControl   bool // control characters refused
	// Multiline, with NoControl, lets line feeds and tabs through (a
	// comment's body): every other control character is refused.
	Multiline bool
	Enum      []string // allowed values, when set
	Default   string   // documented default, when set
}

// Function is one tool, defined once in a file of its own
// (tool_<name>.go): its name, description and arguments, its answer, and
// the write or the read it performs. The catalogue (GET /functions), the
// validation of a call, the MCP tools/list and the dispatch of
// Service.Answer all come from it. The tool builds its answer's body
// (Outcome.Body); the doors send it without reading it.
type Function struct {
	Name        string
	Description string
	Fields      []Field
	// Answer is the 200 body of a call that succeeds, the first branch of
	// the output schema; the branches every tool shares follow it.
	Answer Answer
	// Write is set for a tool that writes, Read for one that only reads;
	// exactly one of them.
	Write *Write
	Read  func(ctx context.Context, s *Service, r Request) Outcome
	// Busy is the message for the model when a store the call needs was
	// busy: what is known of the call and what to do next.
	Busy string
	// Codes are the rejection codes a read answers besides the service's
	// (a Write lists its own in Write.Codes).
	Codes []string
	// schema and output are generated from the definition when the tool
	// is registered.
	schema, output json.RawMessage
}

// Answer is a tool's own answer: its status and the JSON Schemas of its
// members besides "status".
type Answer struct {
	Kind Kind
	// Status is the answer's "status" when it is not Kind's name (a
	// close answers "closed"); a repeat replays it as stored.
	Status   string
	Members  map[string]any
	Required []string // besides "status", which every answer has
}

// Request is a call that passed the checks, as a tool's write or read
// receives it.
type Request struct {
	User      User
	Args      Args
	Canonical string // the arguments' canonical JSON text (RFC 8785)
	// Set for a write: the claim's time and the source of fresh ids for
	// the items the plan names. Whether its tickets and effects go to a
	// helpdesk is the service's to decide, not the plan's.
	Now   time.Time
	NewID func() string
}

// Write is what a tool that writes does once the call's operation key is
// derived. Such a tool needs metadata.request_id, and its repeats replay
// the stored result. idem.Guard judges the claim: the tool only plans.
type Write struct {
	// Plan returns the first call's answer as stored, and the items to
	// commit with the claim on k. It must be pure: it writes nothing and
	// sends nothing (idem.Plan); a repeat of a completed call never runs
	// its writes.
	Plan func(r Request, k idem.OpKey) (stored []byte, w Writes, err error)
	// Answer is the body a stored result gives (Outcome.Body): the first
	// call's (repeat false, answered as the tool's Answer.Kind) or a
	// repeat's (answered deduplicated); false when it cannot be read.
	Answer func(stored []byte, repeat bool) (body []byte, ok bool)
	// InProgress and Mismatch are the messages for the model when the
	// key's operation is still pending, or was made with other arguments.
	InProgress, Mismatch string
	// Refused answers a claim that a condition of the tool's item write
	// Writes.Items[item] refused (nothing was written, nothing claimed):
	// a rejection, or an answer to store under the claim alone. Nil: a
	// refusal is an internal error.
	Refused func(ctx context.Context, s *Service, r Request, item int) Refusal
	// Codes are the rejection codes the tool answers besides the
	// service's (its Refused rejections): the metrics' closed set.
	Codes []string
	// Final marks a write that cannot be undone (a close): MCP clients
	// read it as destructiveHint, and may ask the user before calling.
	Final bool
}

// Refusal is a tool's answer to a refused claim: Store, when set, is the
// answer the service claims the key with, with no writes (a close of a
// ticket another call closed); else Outcome is answered, nothing stored.
type Refusal struct {
	Outcome Outcome
	Store   []byte
}

// Writes reports whether the tool writes: it goes through the operation
// key and so needs metadata.request_id.
func (f *Function) Writes() bool { return f.Write != nil }

// DefaultPriority is a ticket's priority when create_ticket got none: the
// schema's default, what get_ticket shows and what the helpdesk receives.
const DefaultPriority = "normal"

// Function names.
const (
	CreateTicket = "create_ticket"
	GetTicket    = "get_ticket"
)

// Tools is a set of tools, in the order of their names: the order GET
// /functions and MCP tools/list list them in.
type Tools struct{ fns []Function }

// product is the product's tools. Each tool's file registers its
// definition from an init function, so a definition the generators
// cannot express stops the program at start, never a request.
var product Tools

func register(f Function) {
	if err := product.add(f); err != nil {
		panic("core: catalogue: " + err.Error())
	}
}

// NewTools is a set of the given tools, or says which definition is
// wrong.
func NewTools(fns ...Function) (*Tools, error) {
	t := &Tools{}
	for _, f := range fns {
		if err := t.add(f); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// add checks f, generates its schemas and inserts it in name order.
func (t *Tools) add(f Function) error {
	switch {
	case f.Name == "":
		return errors.New("a tool needs a name")
	case (f.Write == nil) == (f.Read == nil):
		return fmt.Errorf("%s: set exactly one of Write and Read", f.Name)
	case f.Write != nil && (f.Write.Plan == nil || f.Write.Answer == nil):
		return fmt.Errorf("%s: a Write needs Plan and Answer", f.Name)
	case f.Write != nil && (f.Write.InProgress == "" || f.Write.Mismatch == ""):
		return fmt.Errorf("%s: a Write needs its InProgress and Mismatch messages", f.Name)
	case f.Busy == "":
		return fmt.Errorf("%s: a tool needs its Busy message", f.Name)
	}
	i, found := slices.BinarySearchFunc(t.fns, f.Name, func(g Function, name string) int { return strings.Compare(g.Name, name) })
	if found {
		return fmt.Errorf("%s: defined twice", f.Name)
	}
	var err error
	if f.schema, err = f.buildSchema(); err != nil {
		return err
	}
	if f.output, err = f.outputSchema(); err != nil {
		return fmt.Errorf("%s: output schema: %w", f.Name, err)
	}
	t.fns = slices.Insert(t.fns, i, f)
	return nil
}

// Functions returns the tools in order. The slice is the caller's; the
// functions in it share their fields with the set and are read-only.
func (t *Tools) Functions() []Function { return slices.Clone(t.fns) }

// Lookup finds a tool by name. The function is the set's own, read-only.
func (t *Tools) Lookup(name string) (*Function, bool) {
	for i := range t.fns {
		if t.fns[i].Name == name {
			return &t.fns[i], true
		}
	}
	return nil, false
}

// names lists the tools' names for a message: "a, b or c".
func (t *Tools) names() string {
	var b strings.Builder
	for i := range t.fns {
		switch {
		case i == 0:
		case i == len(t.fns)-1:
			b.WriteString(" or ")
		default:
			b.WriteString(", ")
		}
		b.WriteString(t.fns[i].Name)
	}
	return b.String()
}

// Functions returns the product's tools, in the order GET /functions
// lists them. The slice is the caller's; the functions in it share their
// fields with the catalogue and are read-only.
func Functions() []Function { return product.Functions() }

// ProductTools is the product's set of tools, read-only.
func ProductTools() *Tools { return &product }

// LookupFunction finds a tool of the product by name. The function is
// the catalogue's own, read-only.
func LookupFunction(name string) (*Function, bool) { return product.Lookup(name) }

// Args are a call's validated arguments; absent optional fields are absent.
type Args map[string]string

// Validate checks the arguments object against the function's fields, in
// one pass of the standard library's JSON tokenizer. The error message is
// written for the model: what is wrong and what to send. It never echoes a
// value. Duplicate member names are left to idem.Canonical, which refuses
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
	if fd.NoControl && fd.Multiline && strings.IndexFunc(v, isControlButLine) >= 0 {
		return fmt.Errorf("%s must not contain control characters other than line breaks and tabs", fd.Name)
	}
	if fd.NoControl && !fd.Multiline && strings.IndexFunc(v, unicode.IsControl) >= 0 {
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
		case fd.Trim && fd.NoControl && fd.MinLen <= 1 && fd.MaxLen >= 2:
			// Length counts after trimming, which minLength and maxLength
			// cannot say: the pattern carries both bounds. blankClass is
			// the white space of TrimBlank that is not a control character
			// (the control ones are refused anyway); a Multiline field
			// allows line feeds and tabs, which are blank too.
			blank, control := blankClass, `\p{Cc}`
			if fd.Multiline {
				blank, control = blankClass+`\t\n`, controlButLineClass
			}
			text := fmt.Sprintf(`[^%[1]s%[2]s](?:%[3]s[^%[1]s%[2]s])?`, blank, control, upTo(`[^`+control+`]`, fd.MaxLen-2))
			if fd.MinLen == 0 {
				text = "(?:" + text + ")?"
			}
			p["pattern"] = fmt.Sprintf(`^[%[1]s]*%[2]s[%[1]s]*$`, blank, text)
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

// upTo is a regular expression of 0 to n of class, as repeats of at most
// 1000, the most RE2 (Go's regexp) allows in one.
func upTo(class string, n int) string {
	var b strings.Builder
	for ; n > 1000; n -= 1000 {
		b.WriteString(class + "{0,1000}")
	}
	fmt.Fprintf(&b, "%s{0,%d}", class, n)
	return b.String()
}

// The white space of every "blank" rule (a title or ticket_id that is only
// white space, the trimming before a length is counted) is the set
// JavaScript's String.prototype.trim removes: the Unicode space separators
// (Zs), tab, line feed, vertical tab, form feed, carriage return, U+2028,
// U+2029 and U+FEFF (the byte order mark). Go's strings.TrimSpace differs:
// it keeps U+FEFF and removes U+0085, so a title of only U+FEFF would pass
// here and be blank to every JavaScript client.

// IsBlank reports whether r is white space in the sense above.
func IsBlank(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', '\u2028', '\u2029', '\ufeff':
		return true
	}
	return unicode.Is(unicode.Zs, r)
}

// TrimBlank removes leading and trailing white space as JavaScript's trim
// does.
func TrimBlank(s string) string { return strings.TrimFunc(s, IsBlank) }

// blankClass is the non-control part of that set as the body of a regular
// expression character class, for the published JSON Schemas: the space
// separators, the line and paragraph separators and U+FEFF, written as the
// characters themselves so that ECMA-262 and RE2 read it alike.
const blankClass = `\p{Zs}` + "\u2028\u2029\ufeff"

// controlButLineClass is the body of a character class of the control
// characters (Cc) but tab and line feed, in escapes ECMA-262 and RE2 read
// alike.
const controlButLineClass = `\x00-\x08\x0B-\x1F\x7F-\x9F`

// isControlButLine reports whether r is a control character other than
// tab and line feed: what a Multiline field refuses.
func isControlButLine(r rune) bool { return unicode.IsControl(r) && r != '\t' && r != '\n' }

// replayable is a write's stored answer: replay checks it can be read
// and marks the repeat.
type replayable interface {
	readable() bool
	repeated()
}

// replay is the stored answer of a write, as Write.Answer gives it: the
// first answer is the stored bytes themselves, which the plan made in
// this call; a repeat's bytes come from a record, so they are decoded,
// checked and marked deduplicated.
func replay[A any, P interface {
	*A
	replayable
}](stored []byte, repeat bool) ([]byte, bool) {
	if !repeat {
		return stored, true
	}
	var a A
	p := P(&a)
	if err := json.Unmarshal(stored, p); err != nil || !p.readable() {
		return nil, false
	}
	p.repeated()
	b, err := json.Marshal(p)
	return b, err == nil
}
