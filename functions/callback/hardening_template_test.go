package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"

	"github.com/aivax-examples/idempotent-callback/internal/config"
	"github.com/aivax-examples/idempotent-callback/internal/nonce"
)

// readTemplate returns template.yaml's top-level mapping and a tmpl over it.
func readTemplate(t *testing.T) (tmpl, *yaml.Node) {
	t.Helper()
	root := testenv.Template(t)
	return tmpl{t: t, root: root}, root
}

// The template's RETENTION pattern and the function's validation agree:
// every value the pattern admits starts the function, and both refuse a
// window under a minute.
func TestRetentionPatternAgreesWithConfig(t *testing.T) {
	tp, _ := readTemplate(t)
	tp.tagged("Resources.CallbackFunction.Properties.Environment.Variables.RETENTION", "!Ref", "RetentionDuration")
	pattern := regexp.MustCompile(tp.node("Parameters.RetentionDuration.AllowedPattern").Value)
	accepts := func(v string) bool {
		_, err := config.FromEnv(func(k string) string {
			switch k {
			case "TABLE_NAME":
				return "t"
			case "RETENTION":
				return v
			}
			return ""
		})
		return err == nil
	}
	var samples []string
	nums := []string{"0", "1", "9", "59", "60", "99", "1440", "9999", "99999", "999999", "9999999", "99999999"}
	for _, a := range nums {
		for _, u := range []string{"h", "m", "s", "ms", "us", "ns"} {
			samples = append(samples, a+u)
			for _, b := range nums[:6] {
				for _, u2 := range []string{"m", "s", "ms"} {
					samples = append(samples, a+u+b+u2)
				}
			}
		}
	}
	samples = append(samples, "", "24h", "1h30m", "1h30m15s", "0h1m", "0.5h", "1.5m", "-1h", "+1h", "24H", "1d", " 24h", "24h ", "1m0s")
	admitted := 0
	for _, v := range samples {
		if !pattern.MatchString(v) {
			continue
		}
		admitted++
		if !accepts(v) {
			t.Errorf("template admits RETENTION=%q, which the function refuses at every cold start", v)
		}
	}
	if admitted < 50 {
		t.Fatalf("the pattern admits only %d of %d samples", admitted, len(samples))
	}
	for _, v := range []string{"1s", "30s", "59s", "0h", "0m", "0m59s", "59999ms", "1ns"} {
		if pattern.MatchString(v) || accepts(v) {
			t.Errorf("RETENTION=%q (under a minute): template admits %v, function accepts %v; want both to refuse",
				v, pattern.MatchString(v), accepts(v))
		}
	}
	for _, v := range []string{"24h", "1m", "90m", "1h30m"} {
		if !pattern.MatchString(v) || !accepts(v) {
			t.Errorf("RETENTION=%q refused", v)
		}
	}
	if d := tp.node("Parameters.RetentionDuration.Default").Value; !pattern.MatchString(d) || !accepts(d) {
		t.Errorf("the default %q is refused", d)
	}
}

// The public URL's limits: nonce cost range, reserved concurrency, log
// retention, and the IAM conditions.
func TestTemplateLimitsThePublicURL(t *testing.T) {
	tp, root := readTemplate(t)
	fn := "Resources.CallbackFunction.Properties"

	tp.tagged(fn+".Environment.Variables.NONCE_MAX_COST", "!Ref", "NonceMaxCost")
	tp.str("Parameters.NonceMaxCost.Default", fmt.Sprint(nonce.DefaultMaxCost))
	tp.str("Parameters.NonceMaxCost.MinValue", "4")
	tp.str("Parameters.NonceMaxCost.MaxValue", fmt.Sprint(nonce.CapCost))
	if nonce.DefaultMaxCost != 10 || nonce.CapCost != 12 {
		t.Errorf("nonce cost default %d, cap %d; want 10 and 12", nonce.DefaultMaxCost, nonce.CapCost)
	}

	if d := tp.node("Parameters.ReservedConcurrency.Default").Value; d == "0" || d == "" {
		t.Errorf("ReservedConcurrency defaults to %q: unreserved", d)
	}

	tp.tagged(fn+".LoggingConfig.LogGroup", "!Ref", "CallbackLogGroup")
	tp.str("Resources.CallbackLogGroup.Type", "AWS::Logs::LogGroup")
	tp.tagged("Resources.CallbackLogGroup.Properties.RetentionInDays", "!Ref", "LogRetentionInDays")
	tp.str("Parameters.LogRetentionInDays.Default", "30")
	var allowed []string
	for _, n := range tp.node("Parameters.LogRetentionInDays.AllowedValues").Content {
		allowed = append(allowed, n.Value)
	}
	if !slices.Contains(allowed, "30") || slices.Contains(allowed, "0") {
		t.Errorf("LogRetentionInDays.AllowedValues = %v", allowed)
	}

	// Each DynamoDB action only on the items it is for.
	leading := map[string][]string{}
	var kms *yaml.Node
	for _, pol := range callbackPolicies(tp) {
		for _, st := range pol {
			a := testenv.Child(st, "Action")
			actions := []string{a.Value}
			if a.Kind == yaml.SequenceNode {
				actions = nil
				for _, x := range a.Content {
					actions = append(actions, x.Value)
				}
			}
			for _, action := range actions {
				if action == "kms:Decrypt" {
					kms = st
				}
				if !strings.HasPrefix(action, "dynamodb:") {
					continue
				}
				keys := testenv.Child(testenv.Child(testenv.Child(st, "Condition"), "ForAllValues:StringLike"), "dynamodb:LeadingKeys")
				if keys == nil {
					t.Errorf("%s without a ForAllValues:StringLike dynamodb:LeadingKeys condition", action)
					continue
				}
				for _, k := range keys.Content {
					leading[action] = append(leading[action], k.Value)
				}
			}
		}
	}
	for action, want := range map[string][]string{
		"dynamodb:PutItem":            {"OP#*", "TICKET#*", "COMMENT#*", "CLOSE#*"},
		"dynamodb:UpdateItem":         {"TICKET#*"},
		"dynamodb:GetItem":            {"USER#*", "TICKET#*", "OP#*"},
		"dynamodb:BatchGetItem":       {"TICKET#*", "COMMENT#*", "CLOSE#*"},
		"dynamodb:ConditionCheckItem": {"OP#*"},
	} {
		got := slices.Clone(leading[action])
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s LeadingKeys = %v, want %v", action, got, want)
		}
	}

	// kms:Decrypt only through SSM, for the one parameter.
	if kms == nil {
		t.Fatal("no kms:Decrypt statement")
	}
	ctxKey := testenv.Child(testenv.Child(testenv.Child(kms, "Condition"), "StringEquals"), "kms:EncryptionContext:PARAMETER_ARN")
	if ctxKey == nil {
		t.Fatal("kms:Decrypt without a kms:EncryptionContext:PARAMETER_ARN condition")
	}
	for name, arn := range map[string]string{
		"/aivax/callback/hook-key": "arn:aws:ssm:eu-west-1:123456789012:parameter/aivax/callback/hook-key",
		"aivax-hook-key":           "arn:aws:ssm:eu-west-1:123456789012:parameter/aivax-hook-key",
	} {
		got, err := cfnEval{root: root, params: map[string]string{"HookKeyParameterName": name}}.eval(ctxKey)
		if err != nil || got != arn {
			t.Errorf("PARAMETER_ARN for %q = %q, %v; want %q", name, got, err, arn)
		}
	}
}

// make dynamodb-local starts DynamoDB Local with -sharedDb: one database
// whatever the access key, so the tables the AWS CLI creates with the
// user's credentials are the ones the server sees.
func TestMakefileDynamoDBLocalSharesOneDatabase(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "\ndynamodb-local:")
	recipe, _, _ := strings.Cut(rest, "\n\n")
	if !ok || !strings.Contains(recipe, "DynamoDBLocal.jar") || !strings.Contains(recipe, " -sharedDb") {
		t.Fatalf("dynamodb-local recipe without -sharedDb:\n%s", recipe)
	}
}
