package cluster

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// TestConformancePinsTheTestbedsKubernetes: the e2e suite is built at the
// Kubernetes version the testbed runs, as conformance asks.
func TestConformancePinsTheTestbedsKubernetes(t *testing.T) {
	version := regexp.MustCompile(`(?m)^\s*(?:require\s+)?k8s\.io/kubernetes (v\S+)`)
	pinned := map[string]string{}
	for _, tool := range []string{"kubernetes", conformanceTool.name} {
		b, err := os.ReadFile(filepath.Join("..", "tools", tool, "go.mod"))
		if err != nil {
			t.Fatal(err)
		}
		m := version.FindSubmatch(b)
		if m == nil {
			t.Fatalf("e2e/tools/%s/go.mod does not require k8s.io/kubernetes", tool)
		}
		pinned[tool] = string(m[1])
	}
	if pinned["kubernetes"] != pinned[conformanceTool.name] {
		t.Errorf("e2e/tools/conformance pins Kubernetes %s, the testbed runs %s", pinned[conformanceTool.name], pinned["kubernetes"])
	}
}
