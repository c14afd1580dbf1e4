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
