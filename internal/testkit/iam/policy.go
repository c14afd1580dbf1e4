// Package iam evaluates AWS IAM identity policies against requests, for
// tests: the role statements of template.yaml (see RoleStatements) are
// checked against the requests the product really sends (see Recorder),
// which DynamoDB Local and the Lambda emulator never authorize.
//
// The evaluation is IAM's documented one for a single identity policy set
// (no resource policies, boundaries or SCPs, which the stack does not
// use): an explicit Deny that matches wins; else an Allow that matches
// allows; else the request is denied by default. A statement matches when
// its Action (or NotAction), its Resource (or NotResource) and every
// condition of its Condition block match. Actions match case-insensitively
// with the wildcards * and ?; resources match ARN segment by ARN segment
// (partition, service, region, account, then the rest), case-sensitively,
// with the same wildcards.
//
// Conditions: the operators of the String and Arn families (Equals,
// NotEquals, EqualsIgnoreCase, NotEqualsIgnoreCase, Like, NotLike; ArnEquals,
// ArnLike, ArnNotEquals, ArnNotLike), Bool and Null, each with the IfExists
// suffix, and the set qualifiers ForAllValues and ForAnyValue. A condition
// key's name is case-insensitive. Operators in a block, and keys under one
// operator, must all match; the values listed for one key match when any
// does. A key missing from the request: false for a positive operator,
// true for a negated one (NotEquals, NotLike) and for any IfExists;
// ForAllValues is true for a missing or empty key, ForAnyValue false. Any
// other operator is an error, never a silent match.
package iam

import (
	"fmt"
	"strings"
)

// Effect is a statement's Effect.
type Effect string

// The two effects.
const (
	Allow Effect = "Allow"
	Deny  Effect = "Deny"
)

// Statement is one policy statement. Exactly one of Action and NotAction,
// and one of Resource and NotResource, is set.
type Statement struct {
	Sid                   string
	Effect                Effect
	Action, NotAction     []string
	Resource, NotResource []string
	// Condition maps an operator ("StringEquals",
	// "ForAllValues:StringLike") to its keys and their values.
	Condition map[string]map[string][]string
}

// Request is one authorization: an action ("dynamodb:GetItem") on one
// resource ARN, with its request context (condition keys and their
// values; a multivalued key has several).
type Request struct {
	Action   string
	Resource string
	Context  map[string][]string
}

// Decision is the outcome of an evaluation.
type Decision int

// The three outcomes.
const (
	ImplicitDeny Decision = iota // no statement allows it
	Allowed
	ExplicitDeny
)

func (d Decision) String() string {
	switch d {
	case Allowed:
		return "allowed"
	case ExplicitDeny:
		return "explicitly denied"
	default:
		return "denied by default (no statement allows it)"
	}
}

// Evaluate decides req under stmts; by names the statement that decided
// (the Sid, or its index), empty for a default deny. An error says the
// policy uses something this package does not evaluate.
func Evaluate(stmts []Statement, req Request) (d Decision, by string, err error) {
	allowedBy := ""
	for i, s := range stmts {
		ok, err := s.Matches(req)
		if err != nil {
			return ImplicitDeny, "", fmt.Errorf("statement %s: %w", s.name(i), err)
		}
		if !ok {
			continue
		}
		switch s.Effect {
		case Deny:
			return ExplicitDeny, s.name(i), nil
		case Allow:
			if allowedBy == "" {
				allowedBy = s.name(i)
			}
		default:
			return ImplicitDeny, "", fmt.Errorf("statement %s: effect %q", s.name(i), s.Effect)
		}
	}
	if allowedBy != "" {
		return Allowed, allowedBy, nil
	}
	return ImplicitDeny, "", nil
}

func (s Statement) name(i int) string {
	if s.Sid != "" {
		return s.Sid
	}
	return fmt.Sprintf("#%d", i)
}

// Matches reports whether s applies to req, whatever its effect.
func (s Statement) Matches(req Request) (bool, error) {
	if (len(s.Action) == 0) == (len(s.NotAction) == 0) {
		return false, fmt.Errorf("exactly one of Action and NotAction is needed")
	}
	if (len(s.Resource) == 0) == (len(s.NotResource) == 0) {
		return false, fmt.Errorf("exactly one of Resource and NotResource is needed")
	}
	if len(s.Action) > 0 && !anyMatch(s.Action, req.Action, actionMatch) ||
		len(s.NotAction) > 0 && anyMatch(s.NotAction, req.Action, actionMatch) {
		return false, nil
	}
	if len(s.Resource) > 0 && !anyMatch(s.Resource, req.Resource, ARNMatch) ||
		len(s.NotResource) > 0 && anyMatch(s.NotResource, req.Resource, ARNMatch) {
		return false, nil
	}
	for op, keys := range s.Condition {
		for key, values := range keys {
			ok, err := condition(op, values, lookup(req.Context, key))
			if err != nil {
				return false, fmt.Errorf("condition %s on %s: %w", op, key, err)
			}
			if !ok {
				return false, nil
			}
		}
	}
	return true, nil
}

func anyMatch(patterns []string, s string, match func(pattern, s string) bool) bool {
	for _, p := range patterns {
		if match(p, s) {
			return true
		}
	}
	return false
}

// actionMatch: "service:Action", both parts case-insensitive.
func actionMatch(pattern, action string) bool {
	return Glob(strings.ToLower(pattern), strings.ToLower(action))
}

// ARNMatch matches an ARN against a pattern (a Resource value or an Arn
// condition value): "*" matches every resource; otherwise each of the six
// colon-separated parts is matched on its own with the wildcards, the
// last ("resource", which may itself hold colons) whole.
func ARNMatch(pattern, arn string) bool {
	if pattern == "*" {
		return true
	}
	p, a := strings.SplitN(pattern, ":", 6), strings.SplitN(arn, ":", 6)
	if len(p) != 6 || len(a) != 6 {
		return false
	}
	for i := range p {
		if !Glob(p[i], a[i]) {
			return false
		}
	}
	return true
}

// Glob matches s against pattern, where * matches any run of characters
// (none included) and ? any one character; nothing else is special.
func Glob(pattern, s string) bool {
	p, t := []rune(pattern), []rune(s)
	// The classic backtracking matcher: remember the last * and the text
	// position it stands for, and widen it on a mismatch.
	pi, ti, star, mark := 0, 0, -1, 0
	for ti < len(t) {
		switch {
		case pi < len(p) && (p[pi] == '?' || p[pi] == t[ti]):
			pi++
			ti++
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, ti
			pi++
		case star >= 0:
			pi = star + 1
			mark++
			ti = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// lookup finds a context key by its case-insensitive name; present is
// false when the request has no such key.
func lookup(ctx map[string][]string, key string) (values []string) {
	if v, ok := ctx[key]; ok {
		return nonNil(v)
	}
	for k, v := range ctx {
		if strings.EqualFold(k, key) {
			return nonNil(v)
		}
	}
	return nil
}

// nonNil tells a present key with no value (an empty, non-nil slice) from
// a missing one (nil).
func nonNil(v []string) []string {
	if v == nil {
		return []string{}
	}
	return v
}
