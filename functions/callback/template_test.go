package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/aivax-examples/idempotent-callback/internal/app/destination"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/httpapi"
	"github.com/aivax-examples/idempotent-callback/internal/metrics"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/emftest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
)

// TestTemplate pins what template.yaml must say for the function to work
// as docs/contract.md describes it (What it is, Stored items,
// Configuration), and its least-privilege policy.
func TestTemplate(t *testing.T) {
	tp, root := readTemplate(t)

	tp.str("Transform", "AWS::Serverless-2016-10-31")

	// The function.
	fn := "Resources.CallbackFunction"
	tp.str(fn+".Type", "AWS::Serverless::Function")
	tp.str(fn+".Metadata.BuildMethod", "makefile")
	p := fn + ".Properties"
	tp.str(p+".CodeUri", ".")
	tp.str(p+".Handler", "bootstrap")
	tp.str(p+".Runtime", "provided.al2023")
	tp.strs(p+".Architectures", "arm64")
	tp.str(p+".Timeout", "10")
	tp.tagged(p+".MemorySize", "!Ref", "MemorySize")
	tp.str(p+".FunctionUrlConfig.AuthType", "NONE")
	tp.str(p+".FunctionUrlConfig.InvokeMode", "BUFFERED")
	tp.str(p+".LoggingConfig.LogFormat", "JSON")
	if rc := tp.node(p + ".ReservedConcurrentExecutions"); rc.Tag != "!If" || len(rc.Content) != 3 ||
		rc.Content[0].Value != "HasReservedConcurrency" || rc.Content[2].Value != "AWS::NoValue" {
		t.Errorf("ReservedConcurrentExecutions: want !If [HasReservedConcurrency, !Ref ReservedConcurrency, !Ref AWS::NoValue]")
	}
	env := p + ".Environment.Variables"
	tp.tagged(env+".TABLE_NAME", "!Ref", "TicketsTable")
	tp.tagged(env+".HOOK_KEY_PARAMETER", "!Ref", "HookKeyParameterName")
	tp.tagged(env+".KEY_POLICY", "!Ref", "KeyPolicy")
	tp.tagged(env+".RETENTION", "!Ref", "RetentionDuration")
	if n := tp.lookup(env + ".HOOK_KEY"); n != nil && (n.Kind != yaml.ScalarNode || n.Value != "") {
		t.Errorf("HOOK_KEY must stay empty in the template: the hook key lives in SSM")
	}

	// The table (docs/contract.md, Stored items). Its keys, index, billing
	// and TTL are held to the Go definition by dynamo_test.TestMatchesTemplate.
	tb := "Resources.TicketsTable"
	tp.str(tb+".Type", "AWS::DynamoDB::Table")
	tp.str(tb+".Properties.PointInTimeRecoverySpecification.PointInTimeRecoveryEnabled", "true")
	tp.str(tb+".Properties.SSESpecification.SSEEnabled", "true")
	tp.tagged(tb+".Properties.DeletionProtectionEnabled", "!Ref", "TableDeletionProtection")

	// Parameters and their defaults.
	tp.str("Parameters.HookKeyParameterName.Default", "/aivax/callback/hook-key")
	tp.str("Parameters.RetentionDuration.Default", "24h")
	tp.str("Parameters.KeyPolicy.Default", "arguments")
	tp.strs("Parameters.KeyPolicy.AllowedValues", "arguments", "request")
	tp.str("Parameters.ReservedConcurrency.Default", "10")
	tp.str("Parameters.TableDeletionProtection.Default", "true")
	tp.node("Parameters.MemorySize.Default")

	// Outputs.
	for _, o := range []string{"CallbackUrl", "FunctionsUrl", "TableName"} {
		tp.node("Outputs." + o + ".Value")
	}
	if v := tp.node("Outputs.CallbackUrl.Value"); v.Tag != "!Sub" || v.Value != "${CallbackFunctionUrl.FunctionUrl}callback" {
		t.Errorf("CallbackUrl: want !Sub ${CallbackFunctionUrl.FunctionUrl}callback, got %s %q", v.Tag, v.Value)
	}
	if v := tp.node("Outputs.FunctionsUrl.Value"); v.Tag != "!Sub" || v.Value != "${CallbackFunctionUrl.FunctionUrl}functions" {
		t.Errorf("FunctionsUrl: want !Sub ${CallbackFunctionUrl.FunctionUrl}functions, got %s %q", v.Tag, v.Value)
	}

	// Least privilege: the function's own role with inline statements
	// only (a SAM policy template such as DynamoDBCrudPolicy would bring
	// Scan, Query, DeleteItem...; SAM's default role would bring
	// AWSLambdaBasicExecutionRole, logs on every log group), logs on its
	// own log group only, and exactly these actions.
	var actions []string
	byAction := map[string]*yaml.Node{}
	for _, pol := range callbackPolicies(tp) {
		for _, st := range pol {
			if value(st, "Effect") != "Allow" {
				t.Errorf("statement %s: Effect %q", value(st, "Sid"), value(st, "Effect"))
			}
			a := testenv.Child(st, "Action")
			switch {
			case a == nil:
				t.Errorf("statement %s: no Action", value(st, "Sid"))
			case a.Kind == yaml.ScalarNode:
				actions = append(actions, a.Value)
				byAction[a.Value] = st
			default:
				for _, x := range a.Content {
					actions = append(actions, x.Value)
					byAction[x.Value] = st
				}
			}
			// X-Ray's write actions take no resource-level permissions:
			// their statement alone may name "*".
			if r := testenv.Child(st, "Resource"); r == nil || (r.Value == "*" && value(st, "Sid") != "WriteTraces") {
				t.Errorf("statement %s: Resource missing or \"*\"", value(st, "Sid"))
			}
		}
	}
	sort.Strings(actions)
	want := []string{"dynamodb:BatchGetItem", "dynamodb:ConditionCheckItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "kms:Decrypt", "ssm:GetParameter",
		"xray:PutTelemetryRecords", "xray:PutTraceSegments"}
	if !slices.Equal(actions, want) {
		t.Errorf("IAM actions = %v, want exactly %v", actions, want)
	}
	for _, a := range []string{"dynamodb:BatchGetItem", "dynamodb:ConditionCheckItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"} {
		if st := byAction[a]; st != nil {
			if r := testenv.Child(st, "Resource"); r.Tag != "!GetAtt" || r.Value != "TicketsTable.Arn" {
				t.Errorf("%s: Resource must be !GetAtt TicketsTable.Arn", a)
			}
		}
	}
	if st := byAction["kms:Decrypt"]; st != nil {
		if c := testenv.Child(testenv.Child(testenv.Child(st, "Condition"), "StringEquals"), "kms:ViaService"); c == nil || c.Tag != "!Sub" ||
			c.Value != "ssm.${AWS::Region}.amazonaws.com" {
			t.Errorf("kms:Decrypt: want Condition StringEquals kms:ViaService ssm.${AWS::Region}.amazonaws.com")
		}
	}
	// The SSM resource is exactly the one parameter, whether its name has
	// a leading slash or not.
	if st := byAction["ssm:GetParameter"]; st != nil {
		for name, arn := range map[string]string{
			"/aivax/callback/hook-key": "arn:aws:ssm:eu-west-1:123456789012:parameter/aivax/callback/hook-key",
			"aivax-hook-key":           "arn:aws:ssm:eu-west-1:123456789012:parameter/aivax-hook-key",
		} {
			ev := cfnEval{root: root, params: map[string]string{"HookKeyParameterName": name}}
			got, err := ev.eval(testenv.Child(st, "Resource"))
			if err != nil {
				t.Errorf("ssm:GetParameter Resource: %v", err)
			} else if got != arn {
				t.Errorf("ssm:GetParameter Resource for %q = %q, want %q", name, got, arn)
			}
		}
	}
}

// TestTemplateMetrics holds template.yaml's alarms and dashboard to what
// the code emits: every metric they read under the namespace parameter is
// one the EMF recorder writes, under a dimension set it writes, with
// dimension values from the closed sets. A renamed metric, dimension or
// outcome fails here instead of leaving an alarm that never fires.
func TestTemplateMetrics(t *testing.T) {
	_, root := readTemplate(t)
	emitted, err := emftest.Emitted(httpapi.MetricLabels(nil), destination.MetricLabels())
	if err != nil {
		t.Fatal(err)
	}
	check := checker{t: t, emitted: emitted}

	if v := get(root, "Parameters", "MetricsNamespace", "Default"); v == nil || v.Value != metrics.DefaultNamespace {
		t.Errorf("Parameters.MetricsNamespace.Default must be %q, the function's default", metrics.DefaultNamespace)
	}
	if v := get(root, "Globals", "Function", "Environment", "Variables", "METRICS_NAMESPACE"); v == nil || v.Tag != "!Ref" || v.Value != "MetricsNamespace" {
		t.Errorf("Globals.Function.Environment.Variables.METRICS_NAMESPACE must be !Ref MetricsNamespace")
	}
	if v := get(root, "Resources", "AlarmTopic", "Type"); v == nil || v.Value != "AWS::SNS::Topic" {
		t.Errorf("Resources.AlarmTopic must be an AWS::SNS::Topic")
	}
	if v := get(root, "Resources", "AlarmEmailSubscription", "Condition"); v == nil || v.Value != "HasAlarmEmail" {
		t.Errorf("the e-mail subscription must be conditional on HasAlarmEmail")
	}

	// Alarms.
	type seen struct{ metric, dims string }
	var alarms []seen
	resources := get(root, "Resources")
	for i := 0; i < len(resources.Content); i += 2 {
		name, res := resources.Content[i].Value, resources.Content[i+1]
		if v := get(res, "Type"); v == nil || v.Value != "AWS::CloudWatch::Alarm" {
			continue
		}
		p := get(res, "Properties")
		if a := get(p, "AlarmActions"); a == nil || len(a.Content) == 0 || a.Content[0].Tag != "!Ref" || a.Content[0].Value != "AlarmTopic" {
			t.Errorf("%s: AlarmActions must notify !Ref AlarmTopic", name)
		}
		var stats []*yaml.Node // nodes holding Namespace, MetricName, Dimensions
		if ms := get(p, "Metrics"); ms != nil {
			for _, m := range ms.Content {
				if s := get(m, "MetricStat", "Metric"); s != nil {
					stats = append(stats, s)
				} else if get(m, "Expression") == nil {
					t.Errorf("%s: a metric is neither a MetricStat nor an Expression", name)
				}
			}
		} else {
			stats = append(stats, p)
		}
		for _, s := range stats {
			metric, dims := check.alarmMetric(name, s)
			alarms = append(alarms, seen{metric, dims})
		}
	}
	for _, want := range []seen{
		{"callbacks_total", "outcome=internal"},
		{"callbacks_total", "outcome=busy"},
		{"callbacks_total", "door=mcp,outcome=unauthenticated"},
		{"callbacks_total", ""},
		{"AWS/Lambda:Throttles", "FunctionName=!Ref CallbackFunction"},
		{"deliveries_total", "state=unknown"},
		{"deliveries_total", "state=failed"},
		{"deliveries_total", "state=misconfigured"},
		{"AWS/Lambda:Errors", "FunctionName=!Ref DeliveryFunction"},
		{"AWS/SQS:ApproximateNumberOfMessagesVisible", "QueueName=!GetAtt DeliveryDeadLetterQueue.QueueName"},
		{"AWS/Lambda:IteratorAge", "FunctionName=!Ref DeliveryFunction"},
	} {
		if !slices.Contains(alarms, want) {
			t.Errorf("no alarm reads %s{%s}", want.metric, want.dims)
		}
	}
	if v := get(root, "Resources", "BusyRateAlarm", "Properties", "Threshold"); v == nil || v.Tag != "!Ref" || v.Value != "BusyRateThreshold" {
		t.Errorf("BusyRateAlarm's threshold must be !Ref BusyRateThreshold")
	}

	// The dashboard.
	body := get(root, "Resources", "Dashboard", "Properties", "DashboardBody")
	if body == nil || body.Tag != "!Sub" {
		t.Fatalf("Resources.Dashboard.Properties.DashboardBody must be a !Sub string")
	}
	subs := map[string]string{"MetricsNamespace": "NAMESPACE", "AWS::Region": "REGION", "CallbackFunction": "FUNCTION"}
	text := regexp.MustCompile(`\$\{([^}]*)\}`).ReplaceAllStringFunc(body.Value, func(m string) string {
		name := m[2 : len(m)-1]
		if v, ok := subs[name]; ok {
			return v
		}
		t.Errorf("dashboard: ${%s} is not a parameter or resource the test knows", name)
		return m
	})
	var dash struct {
		Widgets []struct {
			Properties struct {
				Title   string
				Metrics [][]any
			}
		}
	}
	if err := json.Unmarshal([]byte(text), &dash); err != nil {
		t.Fatalf("DashboardBody is not JSON: %v", err)
	}
	shown := map[string]bool{}
	for _, w := range dash.Widgets {
		for _, m := range w.Properties.Metrics {
			ns, _ := m[0].(string)
			var strs []string
			stat := ""
			for _, x := range m {
				switch v := x.(type) {
				case string:
					strs = append(strs, v)
				case map[string]any:
					stat, _ = v["stat"].(string)
				}
			}
			switch {
			case ns == "NAMESPACE" && len(strs)%2 == 0:
				dims := map[string]string{}
				for i := 2; i < len(strs); i += 2 {
					dims[strs[i]] = strs[i+1]
				}
				check.metric("dashboard "+w.Properties.Title, strs[1], dims)
				shown[strs[1]+"{"+dimString(dims)+"}"] = true
				if stat != "" {
					shown[strs[1]+":"+stat] = true
				}
			case ns == "AWS/Lambda" && len(strs) == 4 && strs[2] == "FunctionName" && strs[3] == "FUNCTION":
			default:
				t.Errorf("dashboard %q: metric %v is neither ours nor the callback function's", w.Properties.Title, m)
			}
		}
	}
	var wantShown []string
	for _, o := range []string{"created", "deduplicated", "busy", "in_progress", "rejected", "unauthenticated", "forbidden", "bad_request", "internal"} {
		wantShown = append(wantShown, "callbacks_total{outcome="+o+"}")
	}
	for _, o := range []string{"created", "deduplicated", "rejected", "unauthenticated", "forbidden", "internal"} {
		wantShown = append(wantShown, "callbacks_total{door=mcp,outcome="+o+"}")
	}
	for _, s := range destination.MetricLabels().States {
		wantShown = append(wantShown, "deliveries_total{state="+s+"}")
	}
	wantShown = append(wantShown, "callback_duration_seconds:p50", "callback_duration_seconds:p99",
		"delivery_lag_seconds:p99", "tickets_waiting{}", "store_call_duration_seconds:p99")
	for _, w := range wantShown {
		if !shown[w] {
			t.Errorf("the dashboard does not show %s", w)
		}
	}
}

type checker struct {
	t       *testing.T
	emitted map[string][][]string
}

// alarmMetric checks one alarm metric (Namespace, MetricName,
// Dimensions) and returns it as metric and "name=value,..." .
func (c checker) alarmMetric(alarm string, n *yaml.Node) (string, string) {
	ns, name := get(n, "Namespace"), get(n, "MetricName")
	if ns == nil || name == nil {
		c.t.Errorf("%s: no Namespace or MetricName", alarm)
		return "", ""
	}
	dims := map[string]string{}
	if d := get(n, "Dimensions"); d != nil {
		for _, x := range d.Content {
			v := get(x, "Value")
			val := v.Value
			if v.Tag == "!Ref" || v.Tag == "!GetAtt" {
				val = v.Tag + " " + v.Value
			}
			dims[get(x, "Name").Value] = val
		}
	}
	switch {
	case ns.Tag == "!Ref" && ns.Value == "MetricsNamespace":
		c.metric(alarm, name.Value, dims)
		return name.Value, dimString(dims)
	case ns.Tag != "!Ref" && ns.Value == "AWS/Lambda":
		if f := dims["FunctionName"]; (f != "!Ref CallbackFunction" && f != "!Ref DeliveryFunction") || len(dims) != 1 {
			c.t.Errorf("%s: an AWS/Lambda alarm must be on FunctionName !Ref CallbackFunction or DeliveryFunction, not %v", alarm, dims)
		}
		return "AWS/Lambda:" + name.Value, dimString(dims)
	case ns.Tag != "!Ref" && ns.Value == "AWS/SQS":
		if dims["QueueName"] != "!GetAtt DeliveryDeadLetterQueue.QueueName" || len(dims) != 1 {
			c.t.Errorf("%s: an AWS/SQS alarm must be on QueueName !GetAtt DeliveryDeadLetterQueue.QueueName, not %v", alarm, dims)
		}
		return "AWS/SQS:" + name.Value, dimString(dims)
	}
	c.t.Errorf("%s: namespace %s %q is neither !Ref MetricsNamespace, AWS/Lambda nor AWS/SQS", alarm, ns.Tag, ns.Value)
	return "", ""
}

// metric checks a metric of our namespace against what the code emits.
func (c checker) metric(where, name string, dims map[string]string) {
	sets, ok := c.emitted[name]
	if !ok {
		c.t.Errorf("%s: metric %q is not one the code emits (%v)", where, name, keys(c.emitted))
		return
	}
	names := make([]string, 0, len(dims))
	for d, v := range dims {
		names = append(names, d)
		var allowed []string
		switch d {
		case metrics.LabelOutcome:
			allowed = httpapi.MetricLabels(nil).Outcomes
		case metrics.LabelCode:
			allowed = httpapi.MetricLabels(nil).Codes
		case metrics.LabelState:
			allowed = destination.MetricLabels().States
		case metrics.LabelDoor:
			allowed = metrics.Doors
		case metrics.LabelFunction:
			for _, f := range core.Functions() {
				allowed = append(allowed, f.Name)
			}
		}
		if !slices.Contains(allowed, v) {
			c.t.Errorf("%s: %s=%q is not a value the code emits (%v)", where, d, v, allowed)
		}
	}
	sort.Strings(names)
	for _, set := range sets {
		s := slices.Clone(set)
		sort.Strings(s)
		if slices.Equal(s, names) {
			return
		}
	}
	c.t.Errorf("%s: %s is never emitted with dimensions %v (only %v)", where, name, names, sets)
}

func dimString(dims map[string]string) string {
	parts := make([]string, 0, len(dims))
	for k, v := range dims {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func keys(m map[string][][]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// tmpl looks up dotted paths of mapping keys.
type tmpl struct {
	t    *testing.T
	root *yaml.Node
}

// callbackPolicies checks that the callback function runs under its own
// role (CallbackFunctionRole: no managed policy, no SAM Policies on the
// function, logs written to CallbackLogGroup only) and returns the
// statements of the role's inline policies, the logs statement left out.
func callbackPolicies(tp tmpl) [][]*yaml.Node {
	tp.t.Helper()
	fn := "Resources.CallbackFunction.Properties"
	tp.tagged(fn+".Role", "!GetAtt", "CallbackFunctionRole.Arn")
	if tp.lookup(fn+".Policies") != nil {
		tp.t.Errorf("%s.Policies: the role is the function's own; SAM policies would add to it", fn)
	}
	role := "Resources.CallbackFunctionRole"
	tp.str(role+".Type", "AWS::IAM::Role")
	if tp.lookup(role+".Properties.ManagedPolicyArns") != nil {
		tp.t.Errorf("%s: no managed policies (AWSLambdaBasicExecutionRole writes to every log group)", role)
	}
	assume := tp.node(role + ".Properties.AssumeRolePolicyDocument.Statement")
	if len(assume.Content) != 1 || value(testenv.Child(assume.Content[0], "Principal"), "Service") != "lambda.amazonaws.com" ||
		value(assume.Content[0], "Action") != "sts:AssumeRole" {
		tp.t.Errorf("%s: want assumed by lambda.amazonaws.com only", role)
	}
	var out [][]*yaml.Node
	logs := 0
	for i, pol := range tp.node(role + ".Properties.Policies").Content {
		sts := testenv.Child(testenv.Child(pol, "PolicyDocument"), "Statement")
		if sts == nil || sts.Kind != yaml.SequenceNode {
			tp.t.Errorf("%s Policies[%d]: want an inline PolicyDocument with a Statement list", role, i)
			continue
		}
		var kept []*yaml.Node
		for _, st := range sts.Content {
			if value(st, "Sid") != "WriteOwnLogs" {
				kept = append(kept, st)
				continue
			}
			logs++
			var acts []string
			for _, a := range testenv.Child(st, "Action").Content {
				acts = append(acts, a.Value)
			}
			if r := testenv.Child(st, "Resource"); value(st, "Effect") != "Allow" || r == nil || r.Tag != "!GetAtt" || r.Value != "CallbackLogGroup.Arn" ||
				!slices.Equal(acts, []string{"logs:CreateLogStream", "logs:PutLogEvents"}) {
				tp.t.Errorf("%s WriteOwnLogs: want logs:CreateLogStream and logs:PutLogEvents on !GetAtt CallbackLogGroup.Arn only", role)
			}
		}
		out = append(out, kept)
	}
	if logs != 1 {
		tp.t.Errorf("%s: %d WriteOwnLogs statements, want 1", role, logs)
	}
	return out
}

func (tp tmpl) lookup(path string) *yaml.Node {
	return get(tp.root, strings.Split(path, ".")...)
}

func (tp tmpl) node(path string) *yaml.Node {
	tp.t.Helper()
	n := tp.lookup(path)
	if n == nil {
		tp.t.Fatalf("template.yaml: %s is missing", path)
	}
	return n
}

func (tp tmpl) str(path, want string) {
	tp.t.Helper()
	if n := tp.node(path); n.Kind != yaml.ScalarNode || n.Value != want || strings.HasPrefix(n.Tag, "!") && !strings.HasPrefix(n.Tag, "!!") {
		tp.t.Errorf("%s = %s %q, want %q", path, n.Tag, n.Value, want)
	}
}

func (tp tmpl) strs(path string, want ...string) {
	tp.t.Helper()
	n := tp.node(path)
	var got []string
	for _, c := range n.Content {
		got = append(got, c.Value)
	}
	if n.Kind != yaml.SequenceNode || !slices.Equal(got, want) {
		tp.t.Errorf("%s = %v, want %v", path, got, want)
	}
}

func (tp tmpl) tagged(path, tag, want string) {
	tp.t.Helper()
	if n := tp.node(path); n.Tag != tag || n.Value != want {
		tp.t.Errorf("%s = %s %q, want %s %s", path, n.Tag, n.Value, tag, want)
	}
}

func value(n *yaml.Node, key string) string {
	if c := testenv.Child(n, key); c != nil {
		return c.Value
	}
	return ""
}

// get follows mapping keys from n; nil when one is missing.
func get(n *yaml.Node, path ...string) *yaml.Node {
	for _, key := range path {
		n = testenv.Child(n, key)
	}
	return n
}

// cfnEval evaluates the few intrinsic functions the IAM resources use,
// with parameter values and fixed pseudo parameters.
type cfnEval struct {
	root   *yaml.Node
	params map[string]string
}

var pseudo = map[string]string{"AWS::Region": "eu-west-1", "AWS::AccountId": "123456789012", "AWS::Partition": "aws"}

func (e cfnEval) ref(name string) (string, error) {
	if v, ok := pseudo[name]; ok {
		return v, nil
	}
	if v, ok := e.params[name]; ok {
		return v, nil
	}
	if d := testenv.Child(testenv.Child(testenv.Child(e.root, "Parameters"), name), "Default"); d != nil {
		return d.Value, nil
	}
	return "", fmt.Errorf("unknown reference %s", name)
}

var subVar = regexp.MustCompile(`\$\{([^}]+)\}`)

func (e cfnEval) eval(n *yaml.Node) (string, error) {
	switch n.Tag {
	case "!!str", "!!int", "!!bool":
		return n.Value, nil
	case "!Ref":
		return e.ref(n.Value)
	case "!Sub":
		var err error
		out := subVar.ReplaceAllStringFunc(n.Value, func(m string) string {
			v, rerr := e.ref(m[2 : len(m)-1])
			if rerr != nil {
				err = rerr
			}
			return v
		})
		return out, err
	case "!If":
		ok, err := e.condition(n.Content[0].Value)
		if err != nil {
			return "", err
		}
		if ok {
			return e.eval(n.Content[1])
		}
		return e.eval(n.Content[2])
	case "!Select":
		parts, err := e.list(n.Content[1])
		if err != nil {
			return "", err
		}
		var i int
		if _, err := fmt.Sscan(n.Content[0].Value, &i); err != nil || i < 0 || i >= len(parts) {
			return "", fmt.Errorf("!Select index %s out of range", n.Content[0].Value)
		}
		return parts[i], nil
	}
	return "", fmt.Errorf("cannot evaluate %s", n.Tag)
}

func (e cfnEval) list(n *yaml.Node) ([]string, error) {
	if n.Tag != "!Split" {
		return nil, fmt.Errorf("cannot evaluate %s as a list", n.Tag)
	}
	s, err := e.eval(n.Content[1])
	return strings.Split(s, n.Content[0].Value), err
}

func (e cfnEval) condition(name string) (bool, error) {
	c := testenv.Child(testenv.Child(e.root, "Conditions"), name)
	if c == nil {
		return false, fmt.Errorf("unknown condition %s", name)
	}
	return e.boolean(c)
}

func (e cfnEval) boolean(n *yaml.Node) (bool, error) {
	switch n.Tag {
	case "!Equals":
		a, err := e.eval(n.Content[0])
		if err != nil {
			return false, err
		}
		b, err := e.eval(n.Content[1])
		return a == b, err
	case "!Not":
		v, err := e.boolean(n.Content[0])
		return !v, err
	case "!Condition":
		return e.condition(n.Value)
	}
	return false, fmt.Errorf("cannot evaluate %s as a condition", n.Tag)
}
