package iam

import (
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

const table = "arn:aws:dynamodb:us-east-1:123456789012:table/T"

func leading(keys ...string) map[string][]string { return map[string][]string{LeadingKeys: keys} }

// TestEvaluate is IAM's evaluation on the cases the template's roles rely
// on, and on their neighbours: each row one request against a set of
// statements, and the decision IAM documents for it.
func TestEvaluate(t *testing.T) {
	allowGet := Statement{Sid: "Get", Effect: Allow, Action: []string{"dynamodb:GetItem"}, Resource: []string{table}}
	opsOnly := func(op string) Statement {
		return Statement{Sid: "Ops", Effect: Allow, Action: []string{"dynamodb:PutItem"}, Resource: []string{table},
			Condition: map[string]map[string][]string{op: {"dynamodb:LeadingKeys": {"OP#*", "TICKET#*"}}}}
	}
	put := func(ctx map[string][]string) Request {
		return Request{Action: "dynamodb:PutItem", Resource: table, Context: ctx}
	}
	cases := []struct {
		name  string
		stmts []Statement
		req   Request
		want  Decision
	}{
		{"an action and resource listed are allowed", []Statement{allowGet}, Request{Action: "dynamodb:GetItem", Resource: table}, Allowed},
		{"actions compare case-insensitively", []Statement{allowGet}, Request{Action: "DynamoDB:getitem", Resource: table}, Allowed},
		{"no statement for the action denies by default", []Statement{allowGet}, Request{Action: "dynamodb:PutItem", Resource: table}, ImplicitDeny},
		{"another resource denies by default", []Statement{allowGet}, Request{Action: "dynamodb:GetItem", Resource: table + "x"}, ImplicitDeny},
		{"resources compare case-sensitively", []Statement{allowGet}, Request{Action: "dynamodb:GetItem", Resource: strings.ToLower(table)}, ImplicitDeny},
		{"an explicit deny wins over an allow", []Statement{allowGet, {Sid: "No", Effect: Deny, Action: []string{"dynamodb:*"}, Resource: []string{"*"}}},
			Request{Action: "dynamodb:GetItem", Resource: table}, ExplicitDeny},
		{"a deny that does not match leaves the allow", []Statement{allowGet, {Effect: Deny, Action: []string{"dynamodb:Delete*"}, Resource: []string{"*"}}},
			Request{Action: "dynamodb:GetItem", Resource: table}, Allowed},
		{"an action wildcard", []Statement{{Effect: Allow, Action: []string{"dynamodb:Get*"}, Resource: []string{table}}},
			Request{Action: "dynamodb:GetRecords", Resource: table}, Allowed},
		{"a ? wildcard is one character", []Statement{{Effect: Allow, Action: []string{"dynamodb:GetItem?"}, Resource: []string{table}}},
			Request{Action: "dynamodb:GetItem", Resource: table}, ImplicitDeny},
		{"NotAction allows every other action", []Statement{{Effect: Allow, NotAction: []string{"dynamodb:DeleteItem"}, Resource: []string{table}}},
			Request{Action: "dynamodb:GetItem", Resource: table}, Allowed},
		{"NotAction does not allow its own action", []Statement{{Effect: Allow, NotAction: []string{"dynamodb:Delete*"}, Resource: []string{table}}},
			Request{Action: "dynamodb:DeleteItem", Resource: table}, ImplicitDeny},
		{"a NotAction deny denies every other action", []Statement{allowGet, {Effect: Deny, NotAction: []string{"dynamodb:PutItem"}, Resource: []string{"*"}}},
			Request{Action: "dynamodb:GetItem", Resource: table}, ExplicitDeny},
		{"NotResource allows every other resource", []Statement{{Effect: Allow, Action: []string{"dynamodb:GetItem"}, NotResource: []string{table + "/index/*"}}},
			Request{Action: "dynamodb:GetItem", Resource: table}, Allowed},
		{"NotResource does not allow its own resources", []Statement{{Effect: Allow, Action: []string{"dynamodb:Query"}, NotResource: []string{table + "/index/*"}}},
			Request{Action: "dynamodb:Query", Resource: table + "/index/due"}, ImplicitDeny},
		{"a resource wildcard spans slashes", []Statement{{Effect: Allow, Action: []string{"dynamodb:GetRecords"}, Resource: []string{table + "/stream/*"}}},
			Request{Action: "dynamodb:GetRecords", Resource: table + "/stream/2026-12-03T09:00:00.000"}, Allowed},
		{"a resource wildcard stays in its ARN part", []Statement{{Effect: Allow, Action: []string{"dynamodb:GetItem"}, Resource: []string{"arn:aws:dynamodb:*:table/T"}}},
			Request{Action: "dynamodb:GetItem", Resource: table}, ImplicitDeny},
		{"a wildcard per ARN part", []Statement{{Effect: Allow, Action: []string{"dynamodb:GetItem"}, Resource: []string{"arn:aws:dynamodb:*:*:table/T"}}},
			Request{Action: "dynamodb:GetItem", Resource: table}, Allowed},
		{"the table's ARN is not its index's", []Statement{{Effect: Allow, Action: []string{"dynamodb:Query"}, Resource: []string{table}}},
			Request{Action: "dynamodb:Query", Resource: table + "/index/due"}, ImplicitDeny},

		{"ForAllValues:StringLike, one key that matches", []Statement{opsOnly("ForAllValues:StringLike")}, put(leading("OP#a")), Allowed},
		{"ForAllValues:StringLike, one key that does not", []Statement{opsOnly("ForAllValues:StringLike")}, put(leading("USER#a")), ImplicitDeny},
		{"ForAllValues:StringLike, two keys that both match", []Statement{opsOnly("ForAllValues:StringLike")}, put(leading("OP#a", "TICKET#b")), Allowed},
		{"ForAllValues:StringLike, two keys, one that does not match", []Statement{opsOnly("ForAllValues:StringLike")}, put(leading("OP#a", "USER#b")), ImplicitDeny},
		{"ForAllValues with the key missing is true", []Statement{opsOnly("ForAllValues:StringLike")}, put(nil), Allowed},
		{"ForAllValues with the key empty is true", []Statement{opsOnly("ForAllValues:StringLike")}, put(leading()), Allowed},
		{"ForAnyValue:StringLike, one key that matches", []Statement{opsOnly("ForAnyValue:StringLike")}, put(leading("TICKET#a")), Allowed},
		{"ForAnyValue:StringLike, one key that does not", []Statement{opsOnly("ForAnyValue:StringLike")}, put(leading("USER#a")), ImplicitDeny},
		{"ForAnyValue:StringLike, two keys, one that matches", []Statement{opsOnly("ForAnyValue:StringLike")}, put(leading("USER#a", "OP#b")), Allowed},
		{"ForAnyValue:StringLike, two keys, none that matches", []Statement{opsOnly("ForAnyValue:StringLike")}, put(leading("USER#a", "USER#b")), ImplicitDeny},
		{"ForAnyValue with the key missing is false", []Statement{opsOnly("ForAnyValue:StringLike")}, put(nil), ImplicitDeny},
		{"ForAnyValue...IfExists with the key missing is false", []Statement{opsOnly("ForAnyValue:StringLikeIfExists")}, put(nil), ImplicitDeny},
		{"ForAllValues:StringNotLike, two keys neither like", []Statement{opsOnly("ForAllValues:StringNotLike")}, put(leading("USER#a", "USER#b")), Allowed},
		{"ForAllValues:StringNotLike, two keys, one like", []Statement{opsOnly("ForAllValues:StringNotLike")}, put(leading("USER#a", "OP#b")), ImplicitDeny},
		{"an explicit deny on leading keys", []Statement{
			{Effect: Allow, Action: []string{"dynamodb:PutItem"}, Resource: []string{table}},
			{Effect: Deny, Action: []string{"dynamodb:PutItem"}, Resource: []string{table},
				Condition: map[string]map[string][]string{"ForAnyValue:StringLike": {LeadingKeys: {"USER#*"}}}},
		}, put(leading("OP#a", "USER#b")), ExplicitDeny},

		{"StringEquals on a present key", []Statement{kmsVia("StringEquals")}, decrypt("ssm.us-east-1.amazonaws.com"), Allowed},
		{"StringEquals on another value", []Statement{kmsVia("StringEquals")}, decrypt("ssm.eu-west-1.amazonaws.com"), ImplicitDeny},
		{"StringEquals with the key missing is false", []Statement{kmsVia("StringEquals")}, Request{Action: "kms:Decrypt", Resource: "*"}, ImplicitDeny},
		{"StringEquals keys compare case-insensitively", []Statement{kmsVia("StringEquals")},
			Request{Action: "kms:Decrypt", Resource: "*", Context: map[string][]string{"KMS:VIASERVICE": {"ssm.us-east-1.amazonaws.com"}}}, Allowed},
		{"StringNotEquals with the key missing is true", []Statement{kmsVia("StringNotEquals")}, Request{Action: "kms:Decrypt", Resource: "*"}, Allowed},
		{"StringEqualsIfExists with the key missing is true", []Statement{kmsVia("StringEqualsIfExists")}, Request{Action: "kms:Decrypt", Resource: "*"}, Allowed},
		{"every key of a condition must match", []Statement{{Effect: Allow, Action: []string{"kms:Decrypt"}, Resource: []string{"*"},
			Condition: map[string]map[string][]string{"StringEquals": {"kms:ViaService": {"ssm.us-east-1.amazonaws.com"}, "kms:EncryptionContext:PARAMETER_ARN": {"p"}}}}},
			decrypt("ssm.us-east-1.amazonaws.com"), ImplicitDeny},
		{"ArnLike on a present key", []Statement{{Effect: Allow, Action: []string{"kms:Decrypt"}, Resource: []string{"*"},
			Condition: map[string]map[string][]string{"ArnLike": {"aws:SourceArn": {"arn:aws:ssm:*:*:parameter/a/*"}}}}},
			Request{Action: "kms:Decrypt", Resource: "*", Context: map[string][]string{"aws:SourceArn": {"arn:aws:ssm:us-east-1:1:parameter/a/b"}}}, Allowed},
		{"Null true with the key missing", []Statement{{Effect: Allow, Action: []string{"kms:Decrypt"}, Resource: []string{"*"},
			Condition: map[string]map[string][]string{"Null": {"kms:ViaService": {"true"}}}}}, Request{Action: "kms:Decrypt", Resource: "*"}, Allowed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, by, err := Evaluate(c.stmts, c.req)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("%s (by %q), want %s", got, by, c.want)
			}
		})
	}
}

func kmsVia(op string) Statement {
	return Statement{Effect: Allow, Action: []string{"kms:Decrypt"}, Resource: []string{"*"},
		Condition: map[string]map[string][]string{op: {"kms:ViaService": {"ssm.us-east-1.amazonaws.com"}}}}
}

func decrypt(via string) Request {
	return Request{Action: "kms:Decrypt", Resource: "*", Context: map[string][]string{"kms:ViaService": {via}}}
}

// TestEvaluateRefusesWhatItCannotJudge: an operator, qualifier or
// statement shape this package does not evaluate is an error, never a
// match or a silent deny.
func TestEvaluateRefusesWhatItCannotJudge(t *testing.T) {
	req := Request{Action: "dynamodb:GetItem", Resource: table, Context: leading("OP#a", "OP#b")}
	for name, s := range map[string]Statement{
		"an unknown operator":         {Effect: Allow, Action: []string{"*"}, Resource: []string{"*"}, Condition: map[string]map[string][]string{"NumericLessThan": {"k": {"1"}}}},
		"an unknown qualifier":        {Effect: Allow, Action: []string{"*"}, Resource: []string{"*"}, Condition: map[string]map[string][]string{"ForSomeValues:StringLike": {LeadingKeys: {"*"}}}},
		"two values, no qualifier":    {Effect: Allow, Action: []string{"*"}, Resource: []string{"*"}, Condition: map[string]map[string][]string{"StringLike": {LeadingKeys: {"OP#*"}}}},
		"both Action and NotAction":   {Effect: Allow, Action: []string{"*"}, NotAction: []string{"x:y"}, Resource: []string{"*"}},
		"neither Resource nor NotRes": {Effect: Allow, Action: []string{"*"}},
		"an unknown effect":           {Effect: "Maybe", Action: []string{"*"}, Resource: []string{"*"}},
	} {
		if d, _, err := Evaluate([]Statement{s}, req); err == nil {
			t.Errorf("%s: %s, want an error", name, d)
		}
	}
}

func TestGlob(t *testing.T) {
	for _, c := range []struct {
		p, s string
		want bool
	}{
		{"", "", true}, {"*", "", true}, {"*", "abc", true}, {"a*c", "abbbc", true}, {"a*c", "abd", false},
		{"OP#*", "OP#", true}, {"OP#*", "OPX", false}, {"a?c", "abc", true}, {"a?c", "ac", false},
		{"*b*b", "abab", true}, {"*b*b", "abba", false}, {"a**", "a", true},
	} {
		if got := Glob(c.p, c.s); got != c.want {
			t.Errorf("Glob(%q, %q) = %v, want %v", c.p, c.s, got, c.want)
		}
	}
}

// TestRoleStatements resolves a role written with each intrinsic the
// product's template uses, in short and long form.
func TestRoleStatements(t *testing.T) {
	const src = `
Parameters:
  Name: {Type: String, Default: /a/b}
  Kind: {Type: String, Default: none}
Conditions:
  IsPath: !Equals ["", !Select [0, !Split ["/", !Ref Name]]]
  On: !Not [!Equals [!Ref Kind, none]]
  Both: !And [!Condition IsPath, {"Fn::Not": [{"Condition": On}]}]
Resources:
  Table: {Type: AWS::DynamoDB::Table}
  Role:
    Type: AWS::IAM::Role
    Properties:
      Policies:
        - PolicyName: p
          PolicyDocument:
            Statement:
              - Sid: S1
                Effect: Allow
                Action: [dynamodb:GetItem]
                Resource: !GetAtt Table.Arn
                Condition:
                  ForAllValues:StringLike:
                    dynamodb:LeadingKeys: ["OP#*"]
              - Sid: S2
                Effect: Allow
                Action: ssm:GetParameter
                Resource: !If [IsPath, !Sub "arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:parameter${Name}", x]
              - Sid: S3
                Effect: !If [Both, Deny, Allow]
                NotAction: {"Fn::Join": [":", [s3, "*"]]}
                NotResource: [{"Fn::Sub": ["${T}/index/*", {T: {"Fn::GetAtt": [Table, Arn]}}]}, !If [On, y, !Ref AWS::NoValue]]
  Gated:
    Type: AWS::IAM::Role
    Condition: On
    Properties: {Policies: []}
`
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatal(err)
	}
	st := Stack{Partition: "aws", Region: "us-east-1", Account: "123456789012", Attributes: map[string]string{"Table.Arn": table}}
	got, err := RoleStatements(doc.Content[0], "Role", st)
	if err != nil {
		t.Fatal(err)
	}
	want := []Statement{
		{Sid: "S1", Effect: Allow, Action: []string{"dynamodb:GetItem"}, Resource: []string{table},
			Condition: map[string]map[string][]string{"ForAllValues:StringLike": {LeadingKeys: {"OP#*"}}}},
		{Sid: "S2", Effect: Allow, Action: []string{"ssm:GetParameter"}, Resource: []string{"arn:aws:ssm:us-east-1:123456789012:parameter/a/b"}},
		{Sid: "S3", Effect: Deny, NotAction: []string{"s3:*"}, NotResource: []string{table + "/index/*"}},
	}
	if len(got) != len(want) {
		t.Fatalf("%d statements, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if g, w := strings.TrimSpace(yamlOf(t, got[i])), strings.TrimSpace(yamlOf(t, want[i])); g != w {
			t.Errorf("statement %d:\n%s\nwant\n%s", i, g, w)
		}
	}
	if _, err := RoleStatements(doc.Content[0], "Gated", st); err == nil || !strings.Contains(err.Error(), "condition On is false") {
		t.Errorf("a role whose condition is false: %v, want an error naming it", err)
	}
	st.Parameters = map[string]string{"Kind": "zendesk"}
	if _, err := RoleStatements(doc.Content[0], "Gated", st); err != nil {
		t.Errorf("a role whose condition is true: %v", err)
	}
	delete(st.Attributes, "Table.Arn")
	if _, err := RoleStatements(doc.Content[0], "Role", st); err == nil || !strings.Contains(err.Error(), "Table.Arn") {
		t.Errorf("a !GetAtt with no value: %v, want an error naming it", err)
	}
}

func yamlOf(t *testing.T, v any) string {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
