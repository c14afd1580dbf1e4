package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/aivax-examples/idempotent-callback/internal/config"
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/deliverylambda"
	"github.com/aivax-examples/idempotent-callback/internal/store/dynamo"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
)

// plain turns a template node into maps, lists and strings, keeping a
// CloudFormation short-form tag as a one-key map: !Ref X -> {"!Ref": "X"}.

// outboxPrefixes are the keys of the items that carry delivery records:
// tickets and their follow-ups, which the stream's filter passes.
var outboxPrefixes = []string{"TICKET#", "COMMENT#", "CLOSE#"}

func plain(n *yaml.Node) any {
	var v any
	switch n.Kind {
	case yaml.MappingNode:
		m := map[string]any{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			m[n.Content[i].Value] = plain(n.Content[i+1])
		}
		v = m
	case yaml.SequenceNode:
		l := []any{}
		for _, c := range n.Content {
			l = append(l, plain(c))
		}
		v = l
	default:
		v = n.Value
	}
	if strings.HasPrefix(n.Tag, "!") && !strings.HasPrefix(n.Tag, "!!") {
		return map[string]any{n.Tag: v}
	}
	return v
}

func loadTemplate(t *testing.T) map[string]any {
	t.Helper()
	return plain(testenv.Template(t)).(map[string]any)
}

// at walks a dotted path (list items by index); a missing step fails
// the test.
func at(t *testing.T, v any, path string) any {
	t.Helper()
	for _, k := range strings.Split(path, ".") {
		switch c := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = c[k]; !ok {
				t.Fatalf("template.yaml: %s is missing (at %q)", path, k)
			}
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i < 0 || i >= len(c) {
				t.Fatalf("template.yaml: %s: no item %q", path, k)
			}
			v = c[i]
		default:
			t.Fatalf("template.yaml: %s: %q is under a scalar", path, k)
		}
	}
	return v
}

func eq(t *testing.T, v any, path string, want any) {
	t.Helper()
	got := at(t, v, path)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s = %v, want %v", path, got, want)
	}
}

// TestTemplateDeliveryFunction pins the delivery function, its event
// sources, its dead-letter queue, its parameters and its least-privilege
// role.
func TestTemplateDeliveryFunction(t *testing.T) {
	tp := loadTemplate(t)

	// Parameters; kind none leaves the function out.
	eq(t, tp, "Parameters.DeliveryKind.Default", "none")
	eq(t, tp, "Parameters.DeliveryKind.AllowedValues", []string{"none", "zendesk", "webhook", "linear"})
	eq(t, tp, "Parameters.DeliveryMaxAttempts.Default", "8")
	eq(t, tp, "Parameters.DeliveryMaxAttempts.MinValue", "1")
	eq(t, tp, "Parameters.DeliveryMaxAttempts.MaxValue", "100")
	eq(t, tp, "Parameters.DeliveryTimeout.Default", "10s")
	eq(t, tp, "Parameters.DeliveryLookup.Default", "false")
	eq(t, tp, "Parameters.LinearTeamId.Default", "")
	for _, p := range []string{"DeliveryUrl", "DeliverySecretParameterName"} {
		at(t, tp, "Parameters."+p)
	}
	eq(t, tp, "Conditions.DeliveryEnabled", map[string]any{"!Not": []any{map[string]any{"!Equals": []any{map[string]any{"!Ref": "DeliveryKind"}, "none"}}}})
	for _, r := range []string{"DeliveryFunction", "DeliveryFunctionRole", "DeliveryDeadLetterQueue", "DeliveryLogGroup"} {
		eq(t, tp, "Resources."+r+".Condition", "DeliveryEnabled")
	}
	// The callback writes tickets pending when a destination is configured.
	eq(t, tp, "Resources.CallbackFunction.Properties.Environment.Variables.DELIVERY_KIND", map[string]any{"!Ref": "DeliveryKind"})

	fn := "Resources.DeliveryFunction"
	eq(t, tp, fn+".Type", "AWS::Serverless::Function")
	eq(t, tp, fn+".Metadata.BuildMethod", "makefile")
	p := fn + ".Properties"
	eq(t, tp, p+".Runtime", "provided.al2023")
	eq(t, tp, p+".Handler", "bootstrap")
	eq(t, tp, p+".Architectures", []string{"arm64"})
	eq(t, tp, p+".LoggingConfig.LogFormat", "JSON")
	eq(t, tp, p+".LoggingConfig.LogGroup", map[string]any{"!Ref": "DeliveryLogGroup"})
	eq(t, tp, p+".Role", map[string]any{"!GetAtt": "DeliveryFunctionRole.Arn"})
	if _, ok := at(t, tp, p).(map[string]any)["Policies"]; ok {
		t.Errorf("%s.Policies: the role is the function's own; SAM policies would add to it", p)
	}
	// The sweep claims until one lease plus one call timeout is left: at
	// the default call timeout it must claim for most of the schedule's
	// minute (a backlog drains in one invocation) and not much longer (the
	// next minute's sweep takes over), and at the longest timeout still
	// claim at all.
	timeout, _ := strconv.Atoi(fmt.Sprint(at(t, tp, p+".Timeout")))
	fnTimeout := time.Duration(timeout) * time.Second
	claims := func(call time.Duration) time.Duration { return fnTimeout - delivery.LeaseFor(call) - call }
	if c := claims(delivery.DefaultCallTimeout); c < 45*time.Second || c > time.Minute {
		t.Errorf("Timeout %d: the sweep claims for %s at the default call timeout; want 45 s to a minute", timeout, c)
	}
	if c := claims(config.MaxDeliveryTimeout); c < 20*time.Second {
		t.Errorf("Timeout %d: the sweep claims for %s at the longest call timeout; want at least 20 s", timeout, c)
	}
	eq(t, tp, p+".EventInvokeConfig.MaximumRetryAttempts", "0")
	eq(t, tp, "Parameters.DeliverySweepConcurrency.Default", strconv.Itoa(deliverylambda.DefaultSweepConcurrency))
	eq(t, tp, "Parameters.DeliverySweepConcurrency.MinValue", "1")
	eq(t, tp, "Parameters.DeliverySweepConcurrency.MaxValue", strconv.Itoa(config.MaxDeliverySweepConcurrency))
	env := p + ".Environment.Variables"
	for k, want := range map[string]string{
		"TABLE_NAME": "TicketsTable", "DELIVERY_KIND": "DeliveryKind", "DELIVERY_URL": "DeliveryUrl",
		"DELIVERY_SECRET_PARAMETER": "DeliverySecretParameterName", "DELIVERY_MAX_ATTEMPTS": "DeliveryMaxAttempts",
		"DELIVERY_TIMEOUT": "DeliveryTimeout", "DELIVERY_LOOKUP": "DeliveryLookup",
		"DELIVERY_SWEEP_CONCURRENCY": "DeliverySweepConcurrency", "DELIVERY_TEAM_ID": "LinearTeamId",
	} {
		eq(t, tp, env+"."+k, map[string]any{"!Ref": want})
	}
	if v := at(t, tp, env).(map[string]any)["DELIVERY_SECRET"]; v != nil && v != "" {
		t.Errorf("DELIVERY_SECRET must stay empty in the template: the credentials live in SSM")
	}

	// The stream source.
	st := p + ".Events.TicketStream"
	eq(t, tp, st+".Type", "DynamoDB")
	sp := st + ".Properties"
	eq(t, tp, sp+".Stream", map[string]any{"!GetAtt": "TicketsTable.StreamArn"})
	eq(t, tp, sp+".StartingPosition", "TRIM_HORIZON")
	eq(t, tp, sp+".FunctionResponseTypes", []string{"ReportBatchItemFailures"})
	eq(t, tp, sp+".BisectBatchOnFunctionError", "true")
	if n, _ := strconv.Atoi(fmt.Sprint(at(t, tp, sp+".MaximumRetryAttempts"))); n < 0 || n > 10 {
		t.Errorf("MaximumRetryAttempts %d: want a small bound (-1 is forever)", n)
	}
	if n, _ := strconv.Atoi(fmt.Sprint(at(t, tp, sp+".MaximumRecordAgeInSeconds"))); n < 60 || n > 6*3600 {
		t.Errorf("MaximumRecordAgeInSeconds %d: want a bound of minutes to hours (-1 is forever)", n)
	}
	// Chosen for latency: a batch no larger than the handler delivers side
	// by side (so it takes one ticket's time), ten batches of a shard at
	// once, and no waiting to fill a batch.
	if n, _ := strconv.Atoi(fmt.Sprint(at(t, tp, sp+".BatchSize"))); n < 1 || n > deliverylambda.DefaultConcurrency {
		t.Errorf("BatchSize %d: want 1..%d, the tickets the handler delivers at once", n, deliverylambda.DefaultConcurrency)
	}
	eq(t, tp, sp+".ParallelizationFactor", "10")
	eq(t, tp, sp+".MaximumBatchingWindowInSeconds", "0")
	eq(t, tp, sp+".DestinationConfig.OnFailure.Type", "SQS")
	eq(t, tp, sp+".DestinationConfig.OnFailure.Destination", map[string]any{"!GetAtt": "DeliveryDeadLetterQueue.Arn"})
	filters := at(t, tp, sp+".FilterCriteria.Filters").([]any)
	if len(filters) != 1 {
		t.Fatalf("FilterCriteria: want one filter, got %d", len(filters))
	}
	var pattern struct {
		EventName []string `json:"eventName"`
		DynamoDB  struct {
			Keys struct {
				PK struct {
					S []map[string]string `json:"S"`
				} `json:"pk"`
			} `json:"Keys"`
			NewImage struct {
				State struct {
					S []string `json:"S"`
				} `json:"delivery_state"`
			} `json:"NewImage"`
		} `json:"dynamodb"`
	}
	if err := json.Unmarshal([]byte(fmt.Sprint(at(t, filters[0], "Pattern"))), &pattern); err != nil {
		t.Fatalf("filter pattern: %v", err)
	}
	var prefixes []string
	for _, p := range pattern.DynamoDB.Keys.PK.S {
		prefixes = append(prefixes, p["prefix"])
	}
	if !slices.Equal(pattern.EventName, []string{"INSERT"}) || !slices.Equal(prefixes, outboxPrefixes) ||
		!slices.Equal(pattern.DynamoDB.NewImage.State.S, []string{"pending"}) {
		t.Errorf("filter pattern %+v: want INSERT of %v items whose delivery_state is pending", pattern, outboxPrefixes)
	}

	// The sweep: an EventBridge rule, whose events say "Scheduled Event".
	eq(t, tp, p+".Events.Sweep.Type", "Schedule")
	eq(t, tp, p+".Events.Sweep.Properties.Schedule", "rate(1 minute)")

	// The dead-letter queue: encrypted, 14 days.
	eq(t, tp, "Resources.DeliveryDeadLetterQueue.Type", "AWS::SQS::Queue")
	eq(t, tp, "Resources.DeliveryDeadLetterQueue.Properties.MessageRetentionPeriod", "1209600")
	eq(t, tp, "Resources.DeliveryDeadLetterQueue.Properties.SqsManagedSseEnabled", "true")
	eq(t, tp, "Resources.DeliveryLogGroup.Properties.RetentionInDays", map[string]any{"!Ref": "LogRetentionInDays"})

	// The role: exactly these actions, each on its one resource.
	eq(t, tp, "Resources.DeliveryFunctionRole.Properties.AssumeRolePolicyDocument.Statement.0.Principal.Service", "lambda.amazonaws.com")
	role := at(t, tp, "Resources.DeliveryFunctionRole.Properties").(map[string]any)
	if _, ok := role["ManagedPolicyArns"]; ok {
		t.Errorf("DeliveryFunctionRole: no managed policies (AWSLambdaDynamoDBExecutionRole reads every stream)")
	}
	policies := role["Policies"].([]any)
	if len(policies) != 1 {
		t.Fatalf("DeliveryFunctionRole: want one inline policy, got %d", len(policies))
	}
	wantStatements := map[string]struct {
		actions  []string
		resource string
	}{
		"WriteOwnLogs":                       {[]string{"logs:CreateLogStream", "logs:PutLogEvents"}, "map[!GetAtt:DeliveryLogGroup.Arn]"},
		"ReadTicketsStream":                  {[]string{"dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"}, "map[!GetAtt:TicketsTable.StreamArn]"},
		"ListTicketsStreams":                 {[]string{"dynamodb:ListStreams"}, "map[!Sub:${TicketsTable.Arn}/stream/*]"},
		"UpdateOutboxItems":                  {[]string{"dynamodb:GetItem", "dynamodb:UpdateItem"}, "map[!GetAtt:TicketsTable.Arn]"},
		"QueryDueIndex":                      {[]string{"dynamodb:Query"}, "map[!Sub:${TicketsTable.Arn}/index/" + dynamo.DeliveryDueIndex + "]"},
		"ReadDeliveryParameter":              {[]string{"ssm:GetParameter"}, ""},
		"DecryptDeliveryParameterViaSsm":     {[]string{"kms:Decrypt"}, ""},
		"SendFailedRecordsToDeadLetterQueue": {[]string{"sqs:SendMessage"}, "map[!GetAtt:DeliveryDeadLetterQueue.Arn]"},
		"WriteTraces":                        {[]string{"xray:PutTelemetryRecords", "xray:PutTraceSegments"}, "*"},
	}
	seen := map[string]bool{}
	for _, s := range at(t, policies[0], "PolicyDocument.Statement").([]any) {
		sid := fmt.Sprint(at(t, s, "Sid"))
		w, ok := wantStatements[sid]
		if !ok {
			t.Errorf("DeliveryFunctionRole: unexpected statement %s", sid)
			continue
		}
		seen[sid] = true
		eq(t, s, "Effect", "Allow")
		var actions []string
		switch a := at(t, s, "Action").(type) {
		case string:
			actions = []string{a}
		case []any:
			for _, x := range a {
				actions = append(actions, fmt.Sprint(x))
			}
		}
		slices.Sort(actions)
		if !slices.Equal(actions, w.actions) {
			t.Errorf("%s: actions %v, want %v", sid, actions, w.actions)
		}
		res := fmt.Sprint(at(t, s, "Resource"))
		// X-Ray's write actions take no resource-level permissions: their
		// statement alone may name "*".
		if (strings.Contains(res, "[*]") || res == "*") && sid != "WriteTraces" {
			t.Errorf("%s: resource %s is a wildcard", sid, res)
		}
		if w.resource != "" && res != w.resource {
			t.Errorf("%s: resource %s, want %s", sid, res, w.resource)
		}
	}
	for sid := range wantStatements {
		if !seen[sid] {
			t.Errorf("DeliveryFunctionRole: statement %s missing", sid)
		}
	}
	eq(t, role, "Policies.0.PolicyDocument.Statement.3.Condition.ForAllValues:StringLike.dynamodb:LeadingKeys", []string{"TICKET#*", "COMMENT#*", "CLOSE#*"})
	eq(t, role, "Policies.0.PolicyDocument.Statement.6.Condition.StringEquals.kms:ViaService", map[string]any{"!Sub": "ssm.${AWS::Region}.amazonaws.com"})
	param := fmt.Sprint(at(t, role, "Policies.0.PolicyDocument.Statement.5.Resource"))
	if !strings.Contains(param, "parameter${DeliverySecretParameterName}") || !strings.Contains(param, "DeliverySecretParameterIsPath") {
		t.Errorf("ReadDeliveryParameter resource %s: want exactly the delivery parameter", param)
	}
}

// TestMakefileBuildsDeliveryFunction: sam build's target and make build.
func TestMakefileBuildsDeliveryFunction(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	mk := string(b)
	for _, want := range []string{
		"build-DeliveryFunction:\n\t$(LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/delivery\n",
		"$(LAMBDA_BUILD) -o dist/delivery/bootstrap ./functions/delivery\n",
	} {
		if !strings.Contains(mk, want) {
			t.Errorf("Makefile lacks %q", want)
		}
	}
}
