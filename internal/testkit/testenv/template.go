package testenv

import (
	"os"
	"path/filepath"
	"testing"

	"gopkg.in/yaml.v3"
)

// Template reads the repository's template.yaml and returns its top-level
// mapping. CloudFormation short-form tags (!Ref, !Sub, !GetAtt, !If...)
// stay on the nodes, so tests read them without a CloudFormation schema.
func Template(t testing.TB) *yaml.Node {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(RepoRoot(t), "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("template.yaml: %v", err)
	}
	return doc.Content[0]
}

// Child is the value of key in mapping m (nil when m is not a mapping or
// has no such key): the step of a walk down a template's nodes.
func Child(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}
