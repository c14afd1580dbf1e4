package iam

import (
	"errors"
	"fmt"
	"strings"
)

// base is a condition operator without qualifier or IfExists: match
// reports whether one request value matches one policy value, negated
// whether the operator is the negation of that match (NotEquals, NotLike).
type base struct {
	match   func(policy, request string) bool
	negated bool
}

var operators = map[string]base{
	"StringEquals":              {func(p, v string) bool { return p == v }, false},
	"StringNotEquals":           {func(p, v string) bool { return p == v }, true},
	"StringEqualsIgnoreCase":    {strings.EqualFold, false},
	"StringNotEqualsIgnoreCase": {strings.EqualFold, true},
	"StringLike":                {Glob, false},
	"StringNotLike":             {Glob, true},
	"ArnEquals":                 {ARNMatch, false},
	"ArnLike":                   {ARNMatch, false},
	"ArnNotEquals":              {ARNMatch, true},
	"ArnNotLike":                {ARNMatch, true},
	"Bool":                      {strings.EqualFold, false},
}

// condition evaluates one operator on one key: policy are the statement's
// values, request the request's (nil when the key is missing).
func condition(op string, policy, request []string) (bool, error) {
	qualifier, name := "", op
	if q, rest, ok := strings.Cut(op, ":"); ok {
		qualifier, name = q, rest
		if q != "ForAllValues" && q != "ForAnyValue" {
			return false, fmt.Errorf("unknown set qualifier %q", q)
		}
	}
	name, ifExists := strings.CutSuffix(name, "IfExists")
	if name == "Null" {
		if qualifier != "" || ifExists {
			return false, errors.New("the Null operator takes no qualifier")
		}
		return null(policy, request)
	}
	b, ok := operators[name]
	if !ok {
		return false, fmt.Errorf("operator %q is not evaluated here", name)
	}
	if len(policy) == 0 {
		return false, fmt.Errorf("no values")
	}
	// one is the operator's verdict on one request value: it matches when
	// any policy value does (values of one key are ORed), and a negated
	// operator is true when none does.
	one := func(v string) bool {
		for _, p := range policy {
			if b.match(p, v) {
				return !b.negated
			}
		}
		return b.negated
	}
	switch qualifier {
	case "ForAllValues":
		// True when every request value passes; a missing or empty key has
		// no value to fail.
		for _, v := range request {
			if !one(v) {
				return false, nil
			}
		}
		return true, nil
	case "ForAnyValue":
		// True when at least one request value passes: never for a missing
		// or empty key, IfExists or not.
		for _, v := range request {
			if one(v) {
				return true, nil
			}
		}
		return false, nil
	}
	switch {
	case request == nil && ifExists:
		return true, nil
	case request == nil:
		// A missing key matches nothing: a positive operator is false, a
		// negated one true.
		return b.negated, nil
	case len(request) != 1:
		return false, fmt.Errorf("the request has %d values for a single-valued operator; use ForAllValues or ForAnyValue", len(request))
	}
	return one(request[0]), nil
}

// null: "true" holds when the key is missing, "false" when it is present.
func null(policy, request []string) (bool, error) {
	if len(policy) != 1 {
		return false, errors.New("the Null operator takes one value")
	}
	switch strings.ToLower(policy[0]) {
	case "true":
		return request == nil, nil
	case "false":
		return request != nil, nil
	}
	return false, fmt.Errorf("the Null operator's value %q is neither true nor false", policy[0])
}
