package cluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestClearRenderedOnlyReplacesACatalog: the catalog's --out is replaced
// when it is missing, empty or an earlier render, and any other folder is
// left alone with an error naming it.
func TestClearRenderedOnlyReplacesACatalog(t *testing.T) {
	root := t.TempDir()
	if err := clearRendered(filepath.Join(root, "missing")); err != nil {
		t.Errorf("missing: %v", err)
	}
	rendered := filepath.Join(root, "rendered")
	if err := os.MkdirAll(filepath.Join(rendered, "task", "gone", "0.1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rendered, "artifacthub-repo.yml"), []byte("owners: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := clearRendered(rendered); err != nil {
		t.Errorf("an earlier render: %v", err)
	}
	if _, err := os.Stat(rendered); !os.IsNotExist(err) {
		t.Errorf("the earlier render is still there: %v", err)
	}
	precious := filepath.Join(root, "precious")
	if err := os.MkdirAll(precious, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(precious, "go.mod"), []byte("module x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := clearRendered(precious); err == nil || !strings.Contains(err.Error(), "refusing to replace "+precious) {
		t.Errorf("a source tree: %v", err)
	}
	if _, err := os.Stat(filepath.Join(precious, "go.mod")); err != nil {
		t.Errorf("the source tree lost its file: %v", err)
	}
}
