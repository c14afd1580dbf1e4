package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// MCPTSClients returns node and the folder of the TypeScript MCP SDK's
// clients (scripts/tools.sh installs them into .cache/mcp-ts from
// tools/mcp-ts), for the MCP door's interoperability tests; missing,
// the test is skipped (failed under CI=true).
func MCPTSClients(t testing.TB) (node, modules string) {
	t.Helper()
	modules = filepath.Join(RepoRoot(t), ".cache", "mcp-ts")
	if fi, err := os.Stat(filepath.Join(modules, "node_modules", "@modelcontextprotocol", "client")); err != nil || !fi.IsDir() {
		missing(t, "the TypeScript MCP clients are not in "+modules)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing(t, "node is not on PATH")
	}
	return node, modules
}
