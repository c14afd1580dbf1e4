package main

import (
	"encoding/json"
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
	"github.com/aivax-examples/idempotent-callback/internal/metrics/emf"
)

// TestTemplateMetrics holds template.yaml's alarms and dashboard to what
// the code emits: every metric they read under the namespace parameter is
// one the EMF recorder writes, under a dimension set it writes, with
// dimension values from the closed sets. A renamed metric, dimension or
// outcome fails here instead of leaving an alarm that never fires.
func TestTemplateMetrics(t *testing.T) {
	_, root := readTemplate(t)
	emitted := emf.Emitted(destination.MetricLabels())
	check := checker{t: t, emitted: emitted}

	if v := get(root, "Parameters", "MetricsNamespace", "Default"); v == nil || v.Value != emf.DefaultNamespace {
		t.Errorf("Parameters.MetricsNamespace.Default must be %q, the function's default", emf.DefaultNamespace)
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
			allowed = httpapi.MetricLabels().Outcomes
		case metrics.LabelCode:
			allowed = httpapi.MetricLabels().Codes
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

// get follows mapping keys from n; nil when one is missing.
func get(n *yaml.Node, path ...string) *yaml.Node {
	for _, key := range path {
		n = child(n, key)
	}
	return n
}
