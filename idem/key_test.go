// Tests of the operation key (docs/contract.md, Operation key).
//
// Where the expected values come from:
//
//   - testdata/rfc8785/{input,output}: copied unchanged from the testdata of
//     github.com/gowebpki/jcs v1.0.2 (the RFC 8785 reference vectors; see
//     testdata/rfc8785/README.md).
//   - testdata/keyvectors.json: written by Node with
//     `node idem/testdata/keyvectors.mjs > idem/testdata/keyvectors.json`
//     (Node v20). The script holds the reference JavaScript implementation,
//     canonicalJson (keys sorted, leaves written by JSON.stringify, at most
//     64 levels below the arguments object), and computes each key as
//     createHash("sha256").update(JSON.stringify([tenant, request_id, function, canonical])).digest("hex")
//     (policy "arguments") or of [tenant, request_id, function] (policy
//     "request"), so a JavaScript server computes the same keys. It also
//     records JSON.stringify of several hundred strings, canonicalJson's
//     verdict on nesting depth, and JSON.stringify of the RFC 8785
//     appendix B doubles. TestKeyVectorsNodeRerun runs the script again
//     when node is on PATH and fails if the committed file is stale.
package idem_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gowebpki/jcs"

	"github.com/aivax-examples/idempotent-callback/idem"
)

// TestRFC8785Vectors checks every jcs v1.0.2 vector through Canonical.
// The arguments of a call are always an object, so a vector whose top
// level is another value is refused as is, and checked as the value of a
// member: {"v":input} must canonicalize to {"v":output}.
func TestRFC8785Vectors(t *testing.T) {
	inputs, err := filepath.Glob("testdata/rfc8785/input/*.json")
	if err != nil || len(inputs) < 10 {
		t.Fatalf("want the 10 jcs vectors in testdata/rfc8785/input, got %d (%v)", len(inputs), err)
	}
	objects := 0
	for _, in := range inputs {
		name := filepath.Base(in)
		t.Run(strings.TrimSuffix(name, ".json"), func(t *testing.T) {
			raw := readFile(t, in)
			want := string(readFile(t, filepath.Join("testdata/rfc8785/output", name)))
			if isObjectText(raw) {
				objects++
			} else {
				if out, err := idem.Canonical(raw); !errors.Is(err, idem.ErrInvalid) {
					t.Fatalf("Canonical of a non-object top-level value = %q, %v; want ErrInvalid", out, err)
				}
				raw = append(append([]byte(`{"v":`), raw...), '}')
				want = `{"v":` + want + `}`
			}
			got, err := idem.Canonical(raw)
			if err != nil {
				t.Fatalf("Canonical: %v", err)
			}
			if got != want {
				t.Fatalf("Canonical:\n got %s\nwant %s", got, want)
			}
		})
	}
	if objects < 5 {
		t.Fatalf("only %d object-valued vectors ran; want french, structures, unicode, values, weird", objects)
	}
}

// TestCanonicalNumbers checks RFC 8785 section 3.2.2.3 and appendix B
// number serialization inside an object.
func TestCanonicalNumbers(t *testing.T) {
	texts := []struct{ in, want string }{
		{"1e21", "1e+21"},
		{"1e20", "100000000000000000000"},
		{"1e-7", "1e-7"},
		{"1e-6", "0.000001"},
		{"0.000001", "0.000001"},
		{"-0", "0"},
		{"-0.0", "0"},
		{"0", "0"},
		{"333333333.33333329", "333333333.3333333"},
		{"4.50", "4.5"},
		{"2e-3", "0.002"},
		{"1E30", "1e+30"},
		{"0.000000000000000000000000001", "1e-27"},
		{"56.0", "56"},
		{"-1.5e-7", "-1.5e-7"},
		{"9007199254740993", "9007199254740992"},
		{"1e-400", "0"}, // underflow rounds to zero, as in JavaScript; not an error
		{"1.7976931348623157e308", "1.7976931348623157e+308"},
	}
	for _, tc := range texts {
		got, err := idem.Canonical([]byte(`{"n":` + tc.in + `}`))
		if err != nil || got != `{"n":`+tc.want+`}` {
			t.Errorf("Canonical({n:%s}) = %s, %v; want {\"n\":%s}", tc.in, got, err, tc.want)
		}
	}
	// Appendix B: IEEE-754 bits and the expected text.
	appendixB := []struct{ hex, want string }{
		{"0000000000000000", "0"},
		{"8000000000000000", "0"},
		{"0000000000000001", "5e-324"},
		{"8000000000000001", "-5e-324"},
		{"7fefffffffffffff", "1.7976931348623157e+308"},
		{"ffefffffffffffff", "-1.7976931348623157e+308"},
		{"4340000000000000", "9007199254740992"},
		{"c340000000000000", "-9007199254740992"},
		{"4430000000000000", "295147905179352830000"},
		{"44b52d02c7e14af5", "9.999999999999997e+22"},
		{"44b52d02c7e14af6", "1e+23"},
		{"44b52d02c7e14af7", "1.0000000000000001e+23"},
		{"444b1ae4d6e2ef4e", "999999999999999700000"},
		{"444b1ae4d6e2ef4f", "999999999999999900000"},
		{"444b1ae4d6e2ef50", "1e+21"},
		{"3eb0c6f7a0b5ed8c", "9.999999999999997e-7"},
		{"3eb0c6f7a0b5ed8d", "0.000001"},
		{"41b3de4355555553", "333333333.3333332"},
		{"41b3de4355555554", "333333333.33333325"},
		{"41b3de4355555555", "333333333.3333333"},
		{"41b3de4355555556", "333333333.3333334"},
		{"41b3de4355555557", "333333333.33333343"},
		{"becbf647612f3696", "-0.0000033333333333333333"},
		{"43143ff3c1cb0959", "1424953923781206.2"},
	}
	node := map[string]string{}
	for _, n := range loadVectors(t).Numbers {
		node[n.Hex] = n.JSON
	}
	for _, tc := range appendixB {
		bits, err := strconv.ParseUint(tc.hex, 16, 64)
		if err != nil {
			t.Fatal(err)
		}
		in := strconv.FormatFloat(math.Float64frombits(bits), 'e', -1, 64) // round-trips exactly
		got, err := idem.Canonical([]byte(`{"n":` + in + `}`))
		if err != nil || got != `{"n":`+tc.want+`}` {
			t.Errorf("%s (%s): Canonical = %s, %v; want %s", tc.hex, in, got, err, tc.want)
		}
		if node[tc.hex] != tc.want {
			t.Errorf("%s: Node's JSON.stringify wrote %q, the RFC says %q", tc.hex, node[tc.hex], tc.want)
		}
	}
}

// nested returns the arguments object with a leaf value at the given level
// (the object is level 0, its member "v" level 1), wrapped in level-1
// containers taken in turn from opens/closes.
func nested(level int, opens, closes []string, leaf string) string {
	var open, close strings.Builder
	var closers []string
	for i := 0; i < level-1; i++ {
		open.WriteString(opens[i%len(opens)])
		closers = append(closers, closes[i%len(closes)])
	}
	for i := len(closers) - 1; i >= 0; i-- {
		close.WriteString(closers[i])
	}
	return `{"v":` + open.String() + leaf + close.String() + `}`
}

// member is the value of "v" in what nested returns.
func member(obj string) string { return obj[len(`{"v":`) : len(obj)-1] }

var (
	arrays  = [2][]string{{"["}, {"]"}}
	objects = [2][]string{{`{"k":`}, {"}"}}
	mixed   = [2][]string{{"[", `{"k":`}, {"]", "}"}}
	mixed2  = [2][]string{{`{"k":`, "["}, {"}", "]"}}
)

// TestCanonicalLimits: every bad input below gets ErrInvalid, and the
// error text never contains the input (the marker SECRET).
func TestCanonicalLimits(t *testing.T) {
	type tc struct {
		name string
		in   string
		ok   bool
	}
	var cases []tc
	for _, shape := range []struct {
		name string
		oc   [2][]string
	}{{"arrays", arrays}, {"objects", objects}, {"arrays-then-objects", mixed}, {"objects-then-arrays", mixed2}} {
		cases = append(cases,
			tc{shape.name + "/scalar-at-64-accepted", nested(64, shape.oc[0], shape.oc[1], `"SECRET"`), true},
			tc{shape.name + "/scalar-at-65-refused", nested(65, shape.oc[0], shape.oc[1], `"SECRET"`), false},
			tc{shape.name + "/empty-array-at-64-accepted", nested(64, shape.oc[0], shape.oc[1], `[]`), true},
			tc{shape.name + "/empty-object-at-64-accepted", nested(64, shape.oc[0], shape.oc[1], `{}`), true},
			tc{shape.name + "/empty-array-at-65-refused", nested(65, shape.oc[0], shape.oc[1], `[]`), false},
			tc{shape.name + "/nonempty-array-at-64-refused", nested(64, shape.oc[0], shape.oc[1], `[1]`), false},
			tc{shape.name + "/at-200-refused", nested(200, shape.oc[0], shape.oc[1], `1`), false},
		)
	}
	cases = append(cases,
		tc{"depth/brackets-inside-strings-do-not-count", `{"v":"` + strings.Repeat("[{", 100) + `\"[["}`, true},
		tc{"depth/64-then-back-then-64-again", `{"a":` + member(nested(64, arrays[0], arrays[1], "1")) + `,"b":` + member(nested(64, objects[0], objects[1], "1")) + `}`, true},
		tc{"depth/64-then-back-then-65", `{"a":` + member(nested(64, arrays[0], arrays[1], "1")) + `,"b":` + member(nested(65, objects[0], objects[1], "1")) + `}`, false},
		tc{"duplicate/top", `{"SECRET":1,"SECRET":2}`, false},
		tc{"duplicate/same-value", `{"SECRET":1,"SECRET":1}`, false},
		tc{"duplicate/nested", `{"a":{"b":[{"SECRET":1,"x":0,"SECRET":2}]}}`, false},
		tc{"duplicate/by-escape", `{"SECRET":1,"\u0053ECRET":2}`, false},
		tc{"duplicate/not-across-objects", `{"a":{"SECRET":1},"b":{"SECRET":1}}`, true},
		tc{"number/1e400", `{"SECRET":1e400}`, false},
		tc{"number/-1e400", `{"SECRET":-1e400}`, false},
		tc{"number/nested-1e309", `{"a":[1,2,{"b":1e309}],"SECRET":0}`, false},
		tc{"number/NaN", `{"SECRET":NaN}`, false},
		tc{"number/Infinity", `{"SECRET":Infinity}`, false},
		tc{"number/leading-plus", `{"SECRET":+1}`, false},
		tc{"number/hex", `{"SECRET":0x10}`, false},
		tc{"surrogate/lone-high", `{"t":"SECRET\ud800"}`, false},
		tc{"surrogate/lone-high-then-text", `{"t":"\ud800SECRET"}`, false},
		tc{"surrogate/lone-low", `{"t":"\udc00SECRET"}`, false},
		tc{"surrogate/high-high", `{"t":"\ud800\ud800SECRET"}`, false},
		tc{"surrogate/in-name", `{"\udfffSECRET":1}`, false},
		tc{"surrogate/pair-accepted", `{"t":"\ud83d\ude02"}`, true},
		tc{"utf8/invalid-byte", "{\"t\":\"SECRET\xff\"}", false},
		tc{"top/array", `["SECRET"]`, false},
		tc{"top/string", `"SECRET"`, false},
		tc{"top/number", `12345`, false},
		tc{"top/null", `null`, false},
		tc{"top/true", `true`, false},
		tc{"invalid/empty", ``, false},
		tc{"invalid/spaces", "  \n", false},
		tc{"invalid/unterminated", `{"SECRET":`, false},
		tc{"invalid/trailing", `{"SECRET":1} x`, false},
		tc{"invalid/two-objects", `{"SECRET":1}{}`, false},
		tc{"invalid/single-quotes", `{'SECRET':1}`, false},
		tc{"invalid/trailing-comma", `{"SECRET":1,}`, false},
		tc{"invalid/raw-control-in-string", "{\"SECRET\":\"a\nb\"}", false},
		tc{"invalid/bad-escape", `{"SECRET":"\x"}`, false},
		tc{"invalid/bare-word", `{"SECRET":yes}`, false},
		tc{"ok/whitespace-around", " \t\r\n{\"a\":1}\n ", true},
	)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := idem.Canonical([]byte(c.in))
			if c.ok {
				if err != nil {
					t.Fatalf("Canonical refused a valid input: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Canonical accepted it: %q", clip(out))
			}
			if !errors.Is(err, idem.ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			if out != "" {
				t.Fatalf("output %q alongside the error", clip(out))
			}
			if strings.Contains(err.Error(), "SECRET") || strings.Contains(err.Error(), "1e4") {
				t.Fatalf("error echoes the input: %q", err)
			}
		})
	}
}

func TestCanonicalErrorsNameTheLimit(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{nested(65, arrays[0], arrays[1], "1"), "64 levels"},
		{`{"a":1,"a":2}`, "twice"},
		{`{"a":1e400}`, "double range"},
		{`[1]`, "JSON object"},
		{`{`, "not valid JSON"},
		{``, "no arguments: send {} for none"},
	} {
		_, err := idem.Canonical([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Canonical(%.40s) error = %v; want it to mention %q", tc.in, err, tc.want)
		}
	}
}

// TestAppendStringMatchesJCS is a property test: for many strings, what
// AppendString writes equals what jcs.Transform writes for the same string
// (given to it with every character escaped differently by encoding/json).
func TestAppendStringMatchesJCS(t *testing.T) {
	pool := []string{
		"a", "Z", "0", " ", "\"", "\\", "/", "<", ">", "&", "'", "\x00", "\x01", "\b", "\t", "\n",
		"\v", "\f", "\r", "\x1b", "\x1f", "\x7f", "\u0080", "\u0085", "\u009f", "\u00a0", "é",
		"\u0301", "\u2028", "\u2029", "\u200b", "\u3000", "\ufeff", "\uffff", "\ud7ff", "\ue000",
		"日", "€", "🎫", "😂", "\U0010ffff", "\U0001d11e", "\xff", "\xc3", "\xed\xa0\x80",
	}
	rng := rand.New(rand.NewPCG(1, 2))
	check := func(s string) {
		t.Helper()
		got := idem.AppendString(nil, s)
		in, err := json.Marshal(s) // escapes <, >, &, U+2028/9 and invalid UTF-8 its own way
		if err != nil {
			t.Fatal(err)
		}
		want, err := jcs.Transform(in)
		if err != nil {
			t.Fatalf("jcs.Transform(%s): %v", in, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("AppendString(%q) = %s; jcs writes %s", s, got, want)
		}
		if !utf8.Valid(got) {
			t.Fatalf("AppendString(%q) wrote invalid UTF-8", s)
		}
	}
	for _, s := range pool {
		check(s)
	}
	for c := 0; c < 0x80; c++ {
		check(string(rune(c)))
	}
	for i := 0; i < 5000; i++ {
		var b strings.Builder
		for n := rng.IntN(30); n > 0; n-- {
			b.WriteString(pool[rng.IntN(len(pool))])
		}
		check(b.String())
	}
	// AppendString appends; it does not replace what is there.
	if got := string(idem.AppendString([]byte("x,"), "<")); got != `x,"<"` {
		t.Fatalf("AppendString onto a prefix = %s", got)
	}
}

// TestAppendStringMatchesNode: JSON.stringify of each string recorded by
// keyvectors.mjs (a fixed list with every C0 control, <>&, U+2028/9,
// quotes, backslashes, emoji, and 300 pseudo-random strings).
func TestAppendStringMatchesNode(t *testing.T) {
	v := loadVectors(t)
	if len(v.Strings) < 300 {
		t.Fatalf("only %d strings in keyvectors.json", len(v.Strings))
	}
	for _, s := range v.Strings {
		if got := string(idem.AppendString(nil, s.S)); got != s.JSON {
			t.Errorf("AppendString(%q) = %s; JSON.stringify wrote %s", s.S, got, s.JSON)
		}
		// A JSON string value alone is its own RFC 8785 text.
		if got, err := jcs.Transform([]byte(s.JSON)); err != nil || string(got) != s.JSON {
			t.Errorf("jcs.Transform(%s) = %s, %v", s.JSON, got, err)
		}
	}
	// Go's encoding/json differs from JSON.stringify exactly in escaping <,
	// >, &, U+2028 and U+2029 (docs/contract.md, Operation key); make
	// sure the vectors exercise that difference.
	differs := 0
	for _, s := range v.Strings {
		if b, _ := json.Marshal(s.S); string(b) != s.JSON {
			differs++
		}
	}
	if differs == 0 {
		t.Fatal("no vector string where encoding/json and JSON.stringify differ")
	}
}

type vectors struct {
	Keys []struct {
		Name         string `json:"name"`
		Tenant       string `json:"tenant"`
		RequestID    string `json:"request_id"`
		Function     string `json:"function"`
		Arguments    string `json:"arguments"`
		Canonical    string `json:"canonical"`
		Fingerprint  string `json:"fingerprint"`
		KeyArguments string `json:"key_arguments"`
		KeyRequest   string `json:"key_request"`
	} `json:"keys"`
	Strings []struct {
		S    string `json:"s"`
		JSON string `json:"json"`
	} `json:"strings"`
	Depth []struct {
		Shape     string `json:"shape"`
		JSON      string `json:"json"`
		OK        bool   `json:"ok"`
		Canonical string `json:"canonical"`
	} `json:"depth"`
	Numbers []struct {
		Hex  string `json:"hex"`
		JSON string `json:"json"`
	} `json:"numbers"`
}

func loadVectors(t testing.TB) vectors {
	t.Helper()
	var v vectors
	if err := json.Unmarshal(readFile(t, "testdata/keyvectors.json"), &v); err != nil {
		t.Fatalf("keyvectors.json: %v", err)
	}
	return v
}

// TestKeyVectors: Canonical and Key against the reference implementation
// in testdata/keyvectors.mjs run in Node, under both policies.
func TestKeyVectors(t *testing.T) {
	v := loadVectors(t)
	if len(v.Keys) < 15 {
		t.Fatalf("only %d key vectors", len(v.Keys))
	}
	byName := map[string]string{}
	for _, k := range v.Keys {
		t.Run(k.Name, func(t *testing.T) {
			canonical, err := idem.Canonical([]byte(k.Arguments))
			if err != nil {
				t.Fatalf("Canonical: %v", err)
			}
			if canonical != k.Canonical {
				t.Fatalf("Canonical:\n got %s\nwant %s (canonicalJson in Node)", clip(canonical), clip(k.Canonical))
			}
			key, fp := idem.Key(idem.PolicyArguments, k.Tenant, k.RequestID, k.Function, canonical)
			if key != k.KeyArguments {
				t.Errorf("Key(arguments) = %s; Node computed %s", key, k.KeyArguments)
			}
			if fp != k.Fingerprint {
				t.Errorf("fingerprint(arguments) = %s; want %s", fp, k.Fingerprint)
			}
			rkey, rfp := idem.Key(idem.PolicyRequest, k.Tenant, k.RequestID, k.Function, canonical)
			if rkey != k.KeyRequest {
				t.Errorf("Key(request) = %s; Node computed %s", rkey, k.KeyRequest)
			}
			if rfp != k.Fingerprint {
				t.Errorf("fingerprint(request) = %s; want %s", rfp, k.Fingerprint)
			}
			if !isLowerHex64(key) || !isLowerHex64(rkey) {
				t.Errorf("keys are not 64 lower-case hex digits: %s %s", key, rkey)
			}
			byName[k.Name] = key
		})
	}
	// Key-order variants are one operation; changed arguments or another
	// tenant are another one.
	if byName["order-a"] == "" || byName["order-a"] != byName["order-b"] || byName["order-a"] != byName["order-c"] {
		t.Errorf("key-order variants got different keys: %q %q %q", byName["order-a"], byName["order-b"], byName["order-c"])
	}
	if byName["order-a"] == byName["changed-args"] || byName["order-a"] == byName["other-tenant"] {
		t.Error("changed arguments or another tenant got the same key")
	}
}

// TestDepthMatchesReference: Canonical accepts exactly what the reference
// canonicalJson of testdata/keyvectors.mjs accepts, at levels 1, 2, 63,
// 64, 65, 66 in five shapes.
func TestDepthMatchesReference(t *testing.T) {
	v := loadVectors(t)
	accepted, refused := 0, 0
	for _, d := range v.Depth {
		got, err := idem.Canonical([]byte(d.JSON))
		if (err == nil) != d.OK {
			t.Errorf("%s (%d bytes): Canonical error %v; canonicalJson accepts it: %v", d.Shape, len(d.JSON), err, d.OK)
			continue
		}
		if d.OK {
			accepted++
			if got != d.Canonical {
				t.Errorf("%s: Canonical %s; canonicalJson %s", d.Shape, got, d.Canonical)
			}
		} else {
			refused++
			if !errors.Is(err, idem.ErrInvalid) {
				t.Errorf("%s: %v does not wrap ErrInvalid", d.Shape, err)
			}
		}
	}
	if accepted == 0 || refused == 0 {
		t.Fatalf("depth vectors one-sided: %d accepted, %d refused", accepted, refused)
	}
}

// TestKeyVectorsNodeRerun regenerates keyvectors.json with Node and
// compares it with the committed file. Without node it skips, except under
// CI=true, where a missing node is a failure.
func TestKeyVectorsNodeRerun(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("node is not on PATH; CI must run the Node key vectors")
		}
		t.Skip("node is not on PATH")
	}
	cmd := exec.Command(node, "testdata/keyvectors.mjs")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node keyvectors.mjs: %v\n%s", err, stderr.Bytes())
	}
	if want := readFile(t, "testdata/keyvectors.json"); !bytes.Equal(out, want) {
		t.Fatal("testdata/keyvectors.json is stale: run `node testdata/keyvectors.mjs > testdata/keyvectors.json` in idem")
	}
}

// TestKeyIsUnambiguous: the array encoding separates the fields, so moving
// text from one field to the next changes the key.
func TestKeyIsUnambiguous(t *testing.T) {
	type in struct{ tenant, req, fn, canon string }
	ins := []in{
		{"ab", "c", "f", "{}"},
		{"a", "bc", "f", "{}"},
		{"a", "b", "cf", "{}"},
		{`a","b`, "c", "f", "{}"},
		{"a", `b","c`, "f", "{}"},
		{"a\\", "b", "f", "{}"},
		{"a", "\\b", "f", "{}"},
	}
	seen := map[string]in{}
	for _, x := range ins {
		k, _ := idem.Key(idem.PolicyArguments, x.tenant, x.req, x.fn, x.canon)
		if prev, dup := seen[k]; dup {
			t.Fatalf("%+v and %+v share key %s", prev, x, k)
		}
		seen[k] = x
	}
	// Under policy request the canonical arguments are not in the key, but
	// they are in the fingerprint.
	k1, f1 := idem.Key(idem.PolicyRequest, "t", "r", "f", `{"a":1}`)
	k2, f2 := idem.Key(idem.PolicyRequest, "t", "r", "f", `{"a":2}`)
	if k1 != k2 || f1 == f2 {
		t.Fatalf("policy request: keys %s %s (want equal), fingerprints %s %s (want different)", k1, k2, f1, f2)
	}
	a1, _ := idem.Key(idem.PolicyArguments, "t", "r", "f", `{"a":1}`)
	a2, _ := idem.Key(idem.PolicyArguments, "t", "r", "f", `{"a":2}`)
	if a1 == a2 || a1 == k1 {
		t.Fatalf("policy arguments: keys %s %s must differ from each other and from the request key %s", a1, a2, k1)
	}
}

func TestParsePolicy(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want idem.Policy
		ok   bool
	}{
		{"", idem.PolicyArguments, true},
		{"arguments", idem.PolicyArguments, true},
		{"request", idem.PolicyRequest, true},
		{"Arguments", "", false},
		{"request ", "", false},
		{"args", "", false},
	} {
		got, err := idem.ParsePolicy(tc.in)
		if got != tc.want || (err == nil) != tc.ok {
			t.Errorf("ParsePolicy(%q) = %q, %v; want %q, ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func isObjectText(b []byte) bool {
	s := bytes.TrimLeft(b, " \t\r\n")
	return len(s) > 0 && s[0] == '{'
}

func isLowerHex64(s string) bool {
	if len(s) != 64 || strings.ToLower(s) != s {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// TestCanonicalMatchesJCS: on thousands of generated objects, valid and
// slightly broken (names that sort differently in UTF-16 and UTF-8, every
// escape, numbers of every form and range, nesting, white space), Canonical
// answers exactly as the reference built on github.com/gowebpki/jcs alone.
func TestCanonicalMatchesJCS(t *testing.T) {
	rng := rand.New(rand.NewPCG(8785, 1))
	names := []string{"a", "b", "A", "", "title", "\u00e9", "\u20ac", "\ue000", "\U0001f600", "\ufb33", "\u0080",
		"aa", "a\u0000", "\u2028", "ab", "b\U0001d11e", "\\u0061", "\\ud83d\\ude02", "\\u20AC", "\\\"", "\\/"}
	strs := []string{"", "x", "Cannot sign in", "<>&", "\u2028\u2029", "\\n\\t\\b\\f\\r", "\\u0001\\u001f\\u007f",
		"\\ud83d\\ude02", "😂", "\u00e9\u0301", "\\/", "\\\\", "\\\"", "\ufeff", "\x7f", "\\u00e9", "\\uD800\\uDC00",
		"\\ud800", "\xff", "\\u0000"}
	nums := []string{"0", "-0", "1", "-1", "1.0", "4.50", "1e21", "1E21", "1e20", "1e-7", "1e-6", "0.000001",
		"123456789012345678901234567890", "9007199254740993", "1e400", "-1e400", "1e-400", "5e-324",
		"1.7976931348623157e308", "1.7976931348623159e308", "2e308", "0.1", "1e+2", "1E-2", "-0.0e0", "00", "1.", ".5",
		"+1", "1e", "0x10", strings.Repeat("9", 320), "1" + strings.Repeat("0", 308), "333333333.33333329"}
	ws := []string{"", "", "", " ", "\n", "\t", " \r\n "}
	var value func(depth int) string
	object := func(depth int) string {
		var b strings.Builder
		b.WriteString("{" + ws[rng.IntN(len(ws))])
		n := rng.IntN(5)
		for i := 0; i < n; i++ {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(`"` + names[rng.IntN(len(names))] + `"` + ws[rng.IntN(len(ws))] + ":" + value(depth+1))
		}
		b.WriteString(ws[rng.IntN(len(ws))] + "}")
		return b.String()
	}
	value = func(depth int) string {
		w := ws[rng.IntN(len(ws))]
		k := rng.IntN(10)
		if depth > 4 && k >= 7 {
			k = 0
		}
		switch k {
		case 0, 1:
			return w + `"` + strs[rng.IntN(len(strs))] + strs[rng.IntN(len(strs))] + `"`
		case 2, 3:
			return w + nums[rng.IntN(len(nums))]
		case 4:
			return w + []string{"true", "false", "null"}[rng.IntN(3)]
		case 5, 6:
			return w + `"` + names[rng.IntN(len(names))] + `"`
		case 7:
			var b strings.Builder
			b.WriteString("[")
			for i, n := 0, rng.IntN(4); i < n; i++ {
				if i > 0 {
					b.WriteString(",")
				}
				b.WriteString(value(depth + 1))
			}
			return w + b.String() + "]"
		default:
			return w + object(depth)
		}
	}
	accepted := 0
	for i := 0; i < 20000; i++ {
		raw := object(0)
		if i%10 == 9 { // a one-byte mutation
			b := []byte(raw)
			const mutations = "{}[],:\"\\ex0-"
			b[rng.IntN(len(b))] = mutations[rng.IntN(len(mutations))]
			raw = string(b)
		}
		got, err := idem.Canonical([]byte(raw))
		want, wantErr := idem.CanonicalJCS([]byte(raw))
		if got != want || (err == nil) != (wantErr == nil) {
			t.Fatalf("Canonical(%q) = %q, %v; jcs reference %q, %v", raw, got, err, want, wantErr)
		}
		if err == nil {
			accepted++
		}
	}
	if accepted < 5000 {
		t.Fatalf("only %d of 20000 generated objects were valid; the generator is off", accepted)
	}
}
