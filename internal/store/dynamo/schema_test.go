package dynamo_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"gopkg.in/yaml.v3"

	"github.com/aivax-examples/idempotent-callback/internal/store/dynamo"
)

// templateTable is the part of template.yaml's table resource that the Go
// definition must agree with.
type templateTable struct {
	Resources map[string]struct {
		Type       string `yaml:"Type"`
		Properties struct {
			BillingMode            string              `yaml:"BillingMode"`
			AttributeDefinitions   []templateAttribute `yaml:"AttributeDefinitions"`
			KeySchema              []templateKey       `yaml:"KeySchema"`
			GlobalSecondaryIndexes []templateIndex     `yaml:"GlobalSecondaryIndexes"`
			StreamSpecification    struct {
				StreamViewType string `yaml:"StreamViewType"`
			} `yaml:"StreamSpecification"`
			TimeToLiveSpecification struct {
				AttributeName string `yaml:"AttributeName"`
				Enabled       bool   `yaml:"Enabled"`
			} `yaml:"TimeToLiveSpecification"`
		} `yaml:"Properties"`
	} `yaml:"Resources"`
}

// templateAttribute is an attribute definition in template.yaml.
type templateAttribute struct {
	AttributeName string `yaml:"AttributeName"`
	AttributeType string `yaml:"AttributeType"`
}

// templateKey is an element of a key schema in template.yaml.
type templateKey struct {
	AttributeName string `yaml:"AttributeName"`
	KeyType       string `yaml:"KeyType"`
}

// templateIndex is a global secondary index in template.yaml.
type templateIndex struct {
	IndexName  string        `yaml:"IndexName"`
	KeySchema  []templateKey `yaml:"KeySchema"`
	Projection struct {
		ProjectionType string `yaml:"ProjectionType"`
	} `yaml:"Projection"`
}

// pairs is each element of list as two strings (a name and a type), the
// form in which the template's lists and Go's are compared.
func pairs[E any](list []E, pair func(E) [2]string) [][2]string {
	out := make([][2]string, len(list))
	for i, e := range list {
		out[i] = pair(e)
	}
	return out
}

func templateKeys(ks []templateKey) [][2]string {
	return pairs(ks, func(k templateKey) [2]string { return [2]string{k.AttributeName, k.KeyType} })
}

func goKeys(ks []types.KeySchemaElement) [][2]string {
	return pairs(ks, func(k types.KeySchemaElement) [2]string { return [2]string{*k.AttributeName, string(k.KeyType)} })
}

// samePairs fails the test unless the template's list, what, has Go's
// elements in Go's order.
func samePairs(t *testing.T, what string, template, golang [][2]string) {
	t.Helper()
	if len(template) != len(golang) {
		t.Fatalf("%s: template has %d elements, Go %d", what, len(template), len(golang))
	}
	for i, e := range template {
		if g := golang[i]; e != g {
			t.Errorf("%s[%d]: template %s %s, Go %s %s", what, i, e[0], e[1], g[0], g[1])
		}
	}
}

// TestMatchesTemplate holds the Go definition that seedlocal and the tests
// create tables from to the table template.yaml deploys: same attribute
// definitions, same key schema, same billing mode, same TTL attribute.
func TestMatchesTemplate(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// A yaml.Node first: CloudFormation's short tags (!Ref, !Sub) elsewhere
	// in the template do not decode into plain Go values.
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("template.yaml: %v", err)
	}
	stripTags(&doc)
	var tmpl templateTable
	if err := doc.Decode(&tmpl); err != nil {
		t.Fatalf("template.yaml: %v", err)
	}
	var tables []string
	for name, r := range tmpl.Resources {
		if r.Type == "AWS::DynamoDB::Table" {
			tables = append(tables, name)
		}
	}
	if len(tables) != 1 {
		t.Fatalf("template.yaml declares tables %v, want exactly one", tables)
	}
	p := tmpl.Resources[tables[0]].Properties
	in := dynamo.CreateTable("t")

	if got, want := p.BillingMode, string(in.BillingMode); got != want {
		t.Errorf("BillingMode: template %q, Go %q", got, want)
	}
	samePairs(t, "AttributeDefinitions", pairs(p.AttributeDefinitions, func(a templateAttribute) [2]string {
		return [2]string{a.AttributeName, a.AttributeType}
	}), pairs(in.AttributeDefinitions, func(a types.AttributeDefinition) [2]string {
		return [2]string{*a.AttributeName, string(a.AttributeType)}
	}))
	samePairs(t, "KeySchema", templateKeys(p.KeySchema), goKeys(in.KeySchema))
	samePairs(t, "GlobalSecondaryIndexes", pairs(p.GlobalSecondaryIndexes, func(x templateIndex) [2]string {
		return [2]string{x.IndexName, x.Projection.ProjectionType}
	}), pairs(in.GlobalSecondaryIndexes, func(g types.GlobalSecondaryIndex) [2]string {
		return [2]string{*g.IndexName, string(g.Projection.ProjectionType)}
	}))
	for i, x := range p.GlobalSecondaryIndexes {
		samePairs(t, fmt.Sprintf("GlobalSecondaryIndexes[%d].KeySchema", i), templateKeys(x.KeySchema), goKeys(in.GlobalSecondaryIndexes[i].KeySchema))
	}
	if got, want := p.StreamSpecification.StreamViewType, string(in.StreamSpecification.StreamViewType); got != want {
		t.Errorf("StreamSpecification: template %q, Go %q", got, want)
	}
	ttl := dynamo.EnableTTL("t").TimeToLiveSpecification
	if p.TimeToLiveSpecification.AttributeName != *ttl.AttributeName || p.TimeToLiveSpecification.Enabled != *ttl.Enabled {
		t.Errorf("TTL: template %+v, Go %s enabled=%v", p.TimeToLiveSpecification, *ttl.AttributeName, *ttl.Enabled)
	}
}

// stripTags drops CloudFormation's custom tags so the document decodes as
// plain YAML (a tagged scalar keeps its value, a tagged sequence its items).
func stripTags(n *yaml.Node) {
	if len(n.Tag) > 1 && n.Tag[0] == '!' && n.Tag[1] != '!' {
		n.Tag = ""
	}
	for _, c := range n.Content {
		stripTags(c)
	}
}
