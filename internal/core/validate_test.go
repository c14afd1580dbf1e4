package core_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/opkey"
)

// sameValidation fails t unless ValidateCanonical on the canonical text of
// raw answers exactly what Validate answers on raw, for every function.
// Inputs Canonical refuses are not ValidateCanonical's business.
func sameValidation(t *testing.T, raw string) {
	t.Helper()
	canonical, err := opkey.Canonical([]byte(raw))
	if err != nil {
		return
	}
	for i := range core.Functions {
		fn := &core.Functions[i]
		want, wantErr := fn.Validate([]byte(raw))
		got, gotErr := fn.ValidateCanonical(canonical)
		if unknownMember(gotErr) && unknownMember(wantErr) {
			// Validate names any one of several unknown members (map
			// order); ValidateCanonical the first in canonical order.
			continue
		}
		if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s on %q (canonical %q):\n ValidateCanonical %v, %v\n Validate          %v, %v",
				fn.Name, clip(raw), clip(canonical), got, gotErr, want, wantErr)
		}
	}
}

func unknownMember(err error) bool {
	return err != nil && strings.Contains(err.Error(), " takes no argument named ")
}

// argumentsGenerator makes argument objects of every shape Validate tells
// apart: known and unknown members (Validate names any one of several
// unknown members, so those answers only need to agree on the kind), strings with every escape, control
// characters, white space and astral characters, null, numbers, arrays
// and objects.
func argumentsGenerator(seed uint64) func() string {
	rng := rand.New(rand.NewPCG(seed, 9))
	known := []string{"title", "description", "priority", "ticket_id", `\u0074itle`, `ti\u0074le`}
	unknown := []string{"Title", "assignee", "", `\u00e9`, "😂", `a\"b`, `\\`, strings.Repeat("n", 60)}
	pieces := []string{"", "x", "Cannot sign in", " ", "\u3000", "\u00a0", `\n`, `\t`, `\u0000`, `\u001f`, "\x7f",
		`\u0085`, "\u0085", `\"`, `\\`, `\/`, "😂", `\ud83d\ude02`, "<>&", "low", "normal", "high", "urgent",
		`\u0068igh`, strings.Repeat("t", 199), strings.Repeat("é", 2000), "\u2028", `\u00e9`}
	others := []string{"null", "null", "1", "-0", "1e3", "true", "false", "[]", `["t"]`, `{}`, `{"a":[1,{"b":"c"}]}`}
	ws := []string{"", "", " ", "\n\t"}
	str := func() string {
		var b strings.Builder
		b.WriteByte('"')
		for n := rng.IntN(4); n > 0; n-- {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		b.WriteByte('"')
		return b.String()
	}
	return func() string {
		var members []string
		for _, k := range known {
			if rng.IntN(3) > 0 {
				continue
			}
			v := str()
			if rng.IntN(4) == 0 {
				v = others[rng.IntN(len(others))]
			}
			members = append(members, ws[rng.IntN(len(ws))]+`"`+k+`"`+ws[rng.IntN(len(ws))]+":"+ws[rng.IntN(len(ws))]+v)
		}
		for rng.IntN(5) == 0 {
			members = append(members, `"`+unknown[rng.IntN(len(unknown))]+`":`+others[rng.IntN(len(others))])
		}
		rng.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
		return "{" + strings.Join(members, ",") + ws[rng.IntN(len(ws))] + "}"
	}
}

// TestValidateCanonicalAgrees: the one-pass validation on canonical text
// (what the service runs) answers as Validate on the original bytes.
func TestValidateCanonicalAgrees(t *testing.T) {
	gen := argumentsGenerator(1)
	for i := 0; i < 20000; i++ {
		sameValidation(t, gen())
	}
}

// FuzzValidateCanonical: as TestValidateCanonicalAgrees, on any bytes.
//
//	go test -run='^$' -fuzz=FuzzValidateCanonical -fuzztime=20s ./internal/core
func FuzzValidateCanonical(f *testing.F) {
	gen := argumentsGenerator(2)
	for i := 0; i < 20; i++ {
		f.Add(gen())
	}
	f.Add(`{"ticket_id":" id "}`)
	f.Fuzz(func(t *testing.T, raw string) {
		sameValidation(t, raw)
	})
}
