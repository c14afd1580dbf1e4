package core

import (
	"strings"
	"unicode"
)

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
