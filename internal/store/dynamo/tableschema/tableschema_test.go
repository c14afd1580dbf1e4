package tableschema_test

import (
	"os"
	"path/filepath"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/aivax-examples/idempotent-callback/internal/store/dynamo/tableschema"
)

// templateTable is the part of template.yaml's table resource that the Go
// definition must agree with.
type templateTable struct {
	Resources map[string]struct {
		Type       string `yaml:"Type"`
		Properties struct {
			BillingMode          string `yaml:"BillingMode"`
			AttributeDefinitions []struct {
				AttributeName string `yaml:"AttributeName"`
				AttributeType string `yaml:"AttributeType"`
			} `yaml:"AttributeDefinitions"`
			KeySchema []struct {
				AttributeName string `yaml:"AttributeName"`
				KeyType       string `yaml:"KeyType"`
			} `yaml:"KeySchema"`
			GlobalSecondaryIndexes []struct {
				IndexName string `yaml:"IndexName"`
				KeySchema []struct {
					AttributeName string `yaml:"AttributeName"`
					KeyType       string `yaml:"KeyType"`
				} `yaml:"KeySchema"`
				Projection struct {
					ProjectionType string `yaml:"ProjectionType"`
				} `yaml:"Projection"`
			} `yaml:"GlobalSecondaryIndexes"`
			StreamSpecification struct {
				StreamViewType string `yaml:"StreamViewType"`
			} `yaml:"StreamSpecification"`
			TimeToLiveSpecification struct {
				AttributeName string `yaml:"AttributeName"`
				Enabled       bool   `yaml:"Enabled"`
			} `yaml:"TimeToLiveSpecification"`
		} `yaml:"Properties"`
	} `yaml:"Resources"`
}

// TestMatchesTemplate holds the Go definition that seedlocal and the tests
// create tables from to the table template.yaml deploys: same attribute
// definitions, same key schema, same billing mode, same TTL attribute.
func TestMatchesTemplate(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "template.yaml"))
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
	in := tableschema.CreateTable("t")

	if got, want := p.BillingMode, string(in.BillingMode); got != want {
		t.Errorf("BillingMode: template %q, Go %q", got, want)
	}
	if len(p.AttributeDefinitions) != len(in.AttributeDefinitions) {
		t.Fatalf("AttributeDefinitions: template has %d, Go %d", len(p.AttributeDefinitions), len(in.AttributeDefinitions))
	}
	for i, a := range p.AttributeDefinitions {
		g := in.AttributeDefinitions[i]
		if a.AttributeName != *g.AttributeName || a.AttributeType != string(g.AttributeType) {
			t.Errorf("AttributeDefinitions[%d]: template %s %s, Go %s %s", i, a.AttributeName, a.AttributeType, *g.AttributeName, g.AttributeType)
		}
	}
	if len(p.KeySchema) != len(in.KeySchema) {
		t.Fatalf("KeySchema: template has %d elements, Go %d", len(p.KeySchema), len(in.KeySchema))
	}
	for i, k := range p.KeySchema {
		g := in.KeySchema[i]
		if k.AttributeName != *g.AttributeName || k.KeyType != string(g.KeyType) {
			t.Errorf("KeySchema[%d]: template %s %s, Go %s %s", i, k.AttributeName, k.KeyType, *g.AttributeName, g.KeyType)
		}
	}
	if len(p.GlobalSecondaryIndexes) != len(in.GlobalSecondaryIndexes) {
		t.Fatalf("GlobalSecondaryIndexes: template has %d, Go %d", len(p.GlobalSecondaryIndexes), len(in.GlobalSecondaryIndexes))
	}
	for i, x := range p.GlobalSecondaryIndexes {
		g := in.GlobalSecondaryIndexes[i]
		if x.IndexName != *g.IndexName || x.Projection.ProjectionType != string(g.Projection.ProjectionType) {
			t.Errorf("GlobalSecondaryIndexes[%d]: template %s %s, Go %s %s", i, x.IndexName, x.Projection.ProjectionType, *g.IndexName, g.Projection.ProjectionType)
		}
		if len(x.KeySchema) != len(g.KeySchema) {
			t.Fatalf("GlobalSecondaryIndexes[%d].KeySchema: template has %d elements, Go %d", i, len(x.KeySchema), len(g.KeySchema))
		}
		for j, k := range x.KeySchema {
			if k.AttributeName != *g.KeySchema[j].AttributeName || k.KeyType != string(g.KeySchema[j].KeyType) {
				t.Errorf("GlobalSecondaryIndexes[%d].KeySchema[%d]: template %s %s, Go %s %s", i, j, k.AttributeName, k.KeyType, *g.KeySchema[j].AttributeName, g.KeySchema[j].KeyType)
			}
		}
	}
	if got, want := p.StreamSpecification.StreamViewType, string(in.StreamSpecification.StreamViewType); got != want {
		t.Errorf("StreamSpecification: template %q, Go %q", got, want)
	}
	ttl := tableschema.EnableTTL("t").TimeToLiveSpecification
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
