package iam

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
)

// Stack fixes what a template's intrinsics resolve to: the pseudo
// parameters, the parameters (their template defaults unless set here),
// and the Ref and GetAtt values of resources, which exist only once a
// stack is deployed.
type Stack struct {
	Partition, Region, Account, StackName string
	// Parameters overrides parameter defaults by name.
	Parameters map[string]string
	// Refs gives a resource's Ref by logical id; Attributes a GetAtt by
	// "LogicalId.Attribute". A reference to one not given is an error.
	Refs, Attributes map[string]string
}

// RoleStatements returns the statements of every inline policy of the
// AWS::IAM::Role role in tmpl (a template's top-level mapping, as
// testenv.Template returns it), every intrinsic resolved under st: !Ref
// of parameters, pseudo parameters and resources, !GetAtt, !Sub, !If with
// the template's Conditions, !Join, !Select, !Split, !Equals, !Not, !And,
// !Or, in short or long form. A role this package cannot fully see
// (managed policies, a permissions boundary, an AWS::IAM::Policy or
// ManagedPolicy resource) or one the parameters leave out of the stack is
// an error. AWS::IAM::RolePolicy resources that name the role by !Ref
// (and that the parameters create) add their statements.
func RoleStatements(tmpl *yaml.Node, role string, st Stack) ([]Statement, error) {
	r := &resolver{tmpl: tmpl, st: st, conds: map[string]bool{}}
	resources := testenv.Child(tmpl, "Resources")
	res := testenv.Child(resources, role)
	if res == nil {
		return nil, fmt.Errorf("iam: no resource %s", role)
	}
	if typ := scalar(testenv.Child(res, "Type")); typ != "AWS::IAM::Role" {
		return nil, fmt.Errorf("iam: %s is a %s, not an AWS::IAM::Role", role, typ)
	}
	if c := scalar(testenv.Child(res, "Condition")); c != "" {
		on, err := r.condition(c)
		if err != nil {
			return nil, err
		}
		if !on {
			return nil, fmt.Errorf("iam: %s is not created under these parameters (condition %s is false)", role, c)
		}
	}
	props := testenv.Child(res, "Properties")
	for _, unseen := range []string{"ManagedPolicyArns", "PermissionsBoundary"} {
		if testenv.Child(props, unseen) != nil {
			return nil, fmt.Errorf("iam: %s has %s, which this package cannot evaluate", role, unseen)
		}
	}
	policies, err := r.eval(testenv.Child(props, "Policies"))
	if err != nil {
		return nil, fmt.Errorf("iam: %s: %w", role, err)
	}
	list, ok := policies.([]any)
	if !ok {
		return nil, fmt.Errorf("iam: %s has no list of Policies", role)
	}
	for i := 0; resources != nil && i+1 < len(resources.Content); i += 2 {
		name, pol := resources.Content[i].Value, resources.Content[i+1]
		switch scalar(testenv.Child(pol, "Type")) {
		case "AWS::IAM::Policy", "AWS::IAM::ManagedPolicy":
			return nil, fmt.Errorf("iam: the template has a policy resource, %s, which this package does not attach to roles", name)
		case "AWS::IAM::RolePolicy":
			// An inline policy of its own resource: one more entry of
			// the role's Policies when it names this role by !Ref and the
			// parameters create it.
			rp, err := r.rolePolicy(name, pol, role)
			if err != nil {
				return nil, err
			}
			if rp != nil {
				list = append(list, rp)
			}
		}
	}
	var out []Statement
	for _, p := range list {
		doc, _ := p.(map[string]any)["PolicyDocument"].(map[string]any)
		stmts, err := statements(doc["Statement"])
		if err != nil {
			return nil, fmt.Errorf("iam: %s, policy %v: %w", role, p.(map[string]any)["PolicyName"], err)
		}
		out = append(out, stmts...)
	}
	return out, nil
}

// rolePolicy returns the AWS::IAM::RolePolicy resource pol (logical id
// name) as an entry of role's Policies, or nil when it is for another
// role or its condition leaves it out of the stack. Its RoleName must be
// a !Ref of a role of the template: a name this package cannot tie to a
// role is an error.
func (r *resolver) rolePolicy(name string, pol *yaml.Node, role string) (map[string]any, error) {
	props := testenv.Child(pol, "Properties")
	target := testenv.Child(props, "RoleName")
	var ref string
	switch {
	case target != nil && target.Tag == "!Ref" && target.Kind == yaml.ScalarNode:
		ref = target.Value
	case testenv.Child(target, "Ref") != nil:
		ref = scalar(testenv.Child(target, "Ref"))
	}
	if ref == "" || scalar(testenv.Child(testenv.Child(testenv.Child(r.tmpl, "Resources"), ref), "Type")) != "AWS::IAM::Role" {
		return nil, fmt.Errorf("iam: the policy resource %s does not name a role of the template by !Ref", name)
	}
	if ref != role {
		return nil, nil
	}
	if c := scalar(testenv.Child(pol, "Condition")); c != "" {
		on, err := r.condition(c)
		if err != nil {
			return nil, err
		}
		if !on {
			return nil, nil
		}
	}
	doc, err := r.eval(testenv.Child(props, "PolicyDocument"))
	if err != nil {
		return nil, fmt.Errorf("iam: %s: %w", name, err)
	}
	if _, ok := doc.(map[string]any); !ok {
		return nil, fmt.Errorf("iam: %s has no PolicyDocument", name)
	}
	return map[string]any{"PolicyName": scalar(testenv.Child(props, "PolicyName")), "PolicyDocument": doc}, nil
}

// statements converts a resolved Statement element (one statement or a
// list) to Statements.
func statements(v any) ([]Statement, error) {
	list, ok := v.([]any)
	if !ok {
		list = []any{v}
	}
	var out []Statement
	for _, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("a statement is not a mapping: %v", e)
		}
		var s Statement
		for k, val := range m {
			var err error
			switch k {
			case "Sid":
				s.Sid, ok = val.(string)
				if !ok {
					err = errors.New("the Sid is not a string")
				}
			case "Effect":
				str, _ := val.(string)
				s.Effect = Effect(str)
				if s.Effect != Allow && s.Effect != Deny {
					err = fmt.Errorf("Effect %v", val)
				}
			case "Action":
				s.Action, err = strs(val)
			case "NotAction":
				s.NotAction, err = strs(val)
			case "Resource":
				s.Resource, err = strs(val)
			case "NotResource":
				s.NotResource, err = strs(val)
			case "Condition":
				s.Condition, err = conditions(val)
			default:
				err = fmt.Errorf("element %s is not evaluated in an identity policy", k)
			}
			if err != nil {
				return nil, fmt.Errorf("statement %q: %w", s.Sid, err)
			}
		}
		out = append(out, s)
	}
	return out, nil
}

func strs(v any) ([]string, error) {
	switch v := v.(type) {
	case string:
		return []string{v}, nil
	case []any:
		out := make([]string, 0, len(v))
		for _, e := range v {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("%v is not a string", e)
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%v is neither a string nor a list of strings", v)
}

func conditions(v any) (map[string]map[string][]string, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("the Condition element is not a mapping")
	}
	out := map[string]map[string][]string{}
	for op, keys := range m {
		km, ok := keys.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("condition %s is not a mapping", op)
		}
		out[op] = map[string][]string{}
		for k, vals := range km {
			s, err := strs(vals)
			if err != nil {
				return nil, fmt.Errorf("condition %s %s: %w", op, k, err)
			}
			out[op][k] = s
		}
	}
	return out, nil
}

// resolver evaluates a template's nodes under a Stack.
type resolver struct {
	tmpl  *yaml.Node
	st    Stack
	conds map[string]bool
}

// noValue is what !Ref AWS::NoValue resolves to: the key or list entry
// holding it is left out.
type noValueT struct{}

var noValue = noValueT{}

// eval resolves n to a string, bool, []any or map[string]any.
func (r *resolver) eval(n *yaml.Node) (any, error) {
	if n == nil {
		return nil, nil
	}
	if n.Kind == yaml.AliasNode {
		return r.eval(n.Alias)
	}
	if fn, ok := strings.CutPrefix(n.Tag, "!"); ok && !strings.HasPrefix(fn, "!") {
		arg, err := r.argument(n)
		if err != nil {
			return nil, err
		}
		return r.intrinsic(fn, arg)
	}
	switch n.Kind {
	case yaml.ScalarNode:
		return n.Value, nil
	case yaml.SequenceNode:
		out := []any{}
		for _, c := range n.Content {
			v, err := r.eval(c)
			if err != nil {
				return nil, err
			}
			if v != noValue {
				out = append(out, v)
			}
		}
		return out, nil
	case yaml.MappingNode:
		if len(n.Content) == 2 {
			k := n.Content[0].Value
			if fn, ok := strings.CutPrefix(k, "Fn::"); ok || k == "Ref" || k == "Condition" && n.Content[1].Kind == yaml.ScalarNode {
				if !ok {
					fn = k
				}
				arg, err := r.eval(n.Content[1])
				if err != nil {
					return nil, err
				}
				return r.intrinsic(fn, arg)
			}
		}
		out := map[string]any{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			v, err := r.eval(n.Content[i+1])
			if err != nil {
				return nil, err
			}
			if v != noValue {
				out[n.Content[i].Value] = v
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("line %d: a YAML node of kind %d", n.Line, n.Kind)
}

// argument is a tagged node's argument, resolved, its tag set aside.
func (r *resolver) argument(n *yaml.Node) (any, error) {
	switch n.Kind {
	case yaml.ScalarNode:
		return n.Value, nil
	case yaml.SequenceNode:
		// Arguments keep AWS::NoValue: !If [c, x, !Ref AWS::NoValue].
		out := make([]any, 0, len(n.Content))
		for _, e := range n.Content {
			v, err := r.eval(e)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	}
	c := *n
	c.Tag = "!!map"
	return r.eval(&c)
}

func (r *resolver) intrinsic(fn string, arg any) (any, error) {
	switch fn {
	case "Ref":
		name, _ := arg.(string)
		return r.ref(name)
	case "GetAtt":
		var name string
		switch a := arg.(type) {
		case string:
			name = a
		case []any:
			if len(a) == 2 {
				name = fmt.Sprint(a[0]) + "." + fmt.Sprint(a[1])
			}
		}
		if v, ok := r.st.Attributes[name]; ok {
			return v, nil
		}
		return nil, fmt.Errorf("!GetAtt %v: no value given in Stack.Attributes", arg)
	case "Sub":
		return r.sub(arg)
	case "If":
		a, ok := arg.([]any)
		if !ok || len(a) != 3 {
			return nil, fmt.Errorf("!If %v: want [condition, then, else]", arg)
		}
		on, err := r.condition(fmt.Sprint(a[0]))
		if err != nil {
			return nil, err
		}
		if on {
			return a[1], nil
		}
		return a[2], nil
	case "Join":
		a, ok := arg.([]any)
		if !ok || len(a) != 2 {
			return nil, fmt.Errorf("!Join %v: want [delimiter, list]", arg)
		}
		parts, err := strs(a[1])
		if err != nil {
			return nil, fmt.Errorf("!Join: %w", err)
		}
		return strings.Join(parts, fmt.Sprint(a[0])), nil
	case "Select":
		a, ok := arg.([]any)
		if !ok || len(a) != 2 {
			return nil, fmt.Errorf("!Select %v: want [index, list]", arg)
		}
		i, err := strconv.Atoi(fmt.Sprint(a[0]))
		list, _ := a[1].([]any)
		if err != nil || i < 0 || i >= len(list) {
			return nil, fmt.Errorf("!Select %v: index out of the list", arg)
		}
		return list[i], nil
	case "Split":
		a, ok := arg.([]any)
		if !ok || len(a) != 2 {
			return nil, fmt.Errorf("!Split %v: want [delimiter, string]", arg)
		}
		out := []any{}
		for _, s := range strings.Split(fmt.Sprint(a[1]), fmt.Sprint(a[0])) {
			out = append(out, s)
		}
		return out, nil
	case "Equals":
		a, ok := arg.([]any)
		if !ok || len(a) != 2 {
			return nil, fmt.Errorf("!Equals %v: want two values", arg)
		}
		return fmt.Sprint(a[0]) == fmt.Sprint(a[1]), nil
	case "Not", "And", "Or":
		a, ok := arg.([]any)
		if !ok || len(a) == 0 || fn == "Not" && len(a) != 1 {
			return nil, fmt.Errorf("!%s %v: wrong arguments", fn, arg)
		}
		all, any := true, false
		for _, e := range a {
			b, ok := e.(bool)
			if !ok {
				return nil, fmt.Errorf("!%s: %v is not a condition", fn, e)
			}
			all, any = all && b, any || b
		}
		switch fn {
		case "Not":
			return !all, nil
		case "And":
			return all, nil
		}
		return any, nil
	case "Condition":
		return r.condition(fmt.Sprint(arg))
	}
	return nil, fmt.Errorf("intrinsic %s is not resolved here", fn)
}

// ref resolves a Ref: a pseudo parameter, a parameter or a resource.
func (r *resolver) ref(name string) (any, error) {
	switch name {
	case "AWS::Partition":
		return r.st.Partition, nil
	case "AWS::Region":
		return r.st.Region, nil
	case "AWS::AccountId":
		return r.st.Account, nil
	case "AWS::StackName":
		return r.st.StackName, nil
	case "AWS::URLSuffix":
		return "amazonaws.com", nil
	case "AWS::NoValue":
		return noValue, nil
	}
	if v, ok := r.st.Parameters[name]; ok {
		return v, nil
	}
	if p := testenv.Child(testenv.Child(r.tmpl, "Parameters"), name); p != nil {
		d := testenv.Child(p, "Default")
		if d == nil {
			return nil, fmt.Errorf("!Ref %s: the parameter has no default and Stack.Parameters gives none", name)
		}
		return d.Value, nil
	}
	if v, ok := r.st.Refs[name]; ok {
		return v, nil
	}
	return nil, fmt.Errorf("!Ref %s: neither a parameter nor a resource given in Stack.Refs", name)
}

// sub resolves !Sub "text" or !Sub [text, {name: value}].
func (r *resolver) sub(arg any) (any, error) {
	text, vars := "", map[string]any{}
	switch a := arg.(type) {
	case string:
		text = a
	case []any:
		if len(a) != 2 {
			return nil, fmt.Errorf("!Sub %v: want text or [text, variables]", arg)
		}
		text, _ = a[0].(string)
		vars, _ = a[1].(map[string]any)
	}
	var b strings.Builder
	for {
		i := strings.Index(text, "${")
		if i < 0 {
			b.WriteString(text)
			return b.String(), nil
		}
		b.WriteString(text[:i])
		j := strings.Index(text[i:], "}")
		if j < 0 {
			return nil, fmt.Errorf("!Sub: unclosed ${ in %q", text)
		}
		name := text[i+2 : i+j]
		text = text[i+j+1:]
		if lit, ok := strings.CutPrefix(name, "!"); ok {
			b.WriteString("${" + lit + "}")
			continue
		}
		var v any
		var err error
		switch val, ok := vars[name]; {
		case ok:
			v = val
		case strings.Contains(name, ".") && !strings.HasPrefix(name, "AWS::"):
			v, err = r.intrinsic("GetAtt", name)
		default:
			v, err = r.ref(name)
		}
		if err != nil {
			return nil, fmt.Errorf("!Sub ${%s}: %w", name, err)
		}
		fmt.Fprint(&b, v)
	}
}

// condition evaluates the template's named condition (memoized).
func (r *resolver) condition(name string) (bool, error) {
	if v, ok := r.conds[name]; ok {
		return v, nil
	}
	n := testenv.Child(testenv.Child(r.tmpl, "Conditions"), name)
	if n == nil {
		return false, fmt.Errorf("no condition %s", name)
	}
	v, err := r.eval(n)
	if err != nil {
		return false, fmt.Errorf("condition %s: %w", name, err)
	}
	b, ok := v.(bool)
	if !ok {
		return false, fmt.Errorf("condition %s is %v, not a condition", name, v)
	}
	r.conds[name] = b
	return b, nil
}

func scalar(n *yaml.Node) string {
	if n == nil || n.Kind != yaml.ScalarNode {
		return ""
	}
	return n.Value
}
