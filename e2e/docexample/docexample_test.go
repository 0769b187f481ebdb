package docexample

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// callers maps each id passed as a literal to docexample.Find in a Go
// file of the repository to the places that pass it.
func callers(t *testing.T, root string) map[string][]string {
	t.Helper()
	ids := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_") || d.Name() == "testdata") && p != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "Find" || len(call.Args) != 2 {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "docexample" {
				return true
			}
			lit, ok := call.Args[1].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				t.Errorf("%s: docexample.Find with an id that is not a string literal", fset.Position(call.Pos()))
				return true
			}
			id, _ := strconv.Unquote(lit.Value)
			ids[id] = append(ids[id], fset.Position(call.Pos()).String())
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// repoRoot is the repository's root, or fails the test.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// TestEveryExampleIsRunOrSaysWhy: every shell and YAML block of the README
// and docs/ is run by a test that names it, or says why none can; every
// name a test asks for is a block's.
func TestEveryExampleIsRunOrSaysWhy(t *testing.T) {
	root := repoRoot(t)
	all, err := All(root)
	if err != nil {
		t.Fatal(err)
	}
	used := callers(t, root)
	marked := map[string]bool{}
	tested, untested := 0, 0
	for _, e := range all {
		switch {
		case e.ID != "":
			tested++
			marked[e.ID] = true
			if len(used[e.ID]) == 0 {
				t.Errorf("%s: marked <!-- test: %s --> but no test calls docexample.Find(t, %q)", e, e.ID, e.ID)
			}
		case e.Untested != "":
			untested++
		}
	}
	for id, where := range used {
		if !marked[id] {
			t.Errorf("%s: docexample.Find(t, %q) names no example of the docs", strings.Join(where, ", "), id)
		}
	}
	t.Logf("%d examples run by tests, %d not (each says why)", tested, untested)
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, page, err string
		want            []Example
	}{
		{name: "tested and untested", page: "# t\n<!-- test: a-b -->\n```sh\necho hi\n```\ntext\n<!-- not tested: needs a registry -->\n```yaml\nk: v\n```\n```text\nfree\n```\n",
			want: []Example{{ID: "a-b", Line: 3, Lang: "sh", Body: "echo hi\n"}, {Untested: "needs a registry", Line: 8, Lang: "yaml", Body: "k: v\n"}, {Line: 11, Lang: "text", Body: "free\n"}}},
		{name: "indented fence in a list", page: "- item\n  <!-- test: x -->\n  ```yaml\n  a: 1\n  ```\n",
			want: []Example{{ID: "x", Line: 3, Lang: "yaml", Body: "a: 1\n"}}},
		{name: "unmarked shell", page: "```sh\nls\n```\n", err: "without a marker"},
		{name: "unmarked bash", page: "x\n\n```bash\nls\n```\n", err: "page.md:3: a bash example without a marker"},
		{name: "marker then text", page: "<!-- test: x -->\nwords\n```sh\nls\n```\n", err: "not followed by a fenced block"},
		{name: "bad marker", page: "<!-- test: Upper -->\n```sh\nls\n```\n", err: "neither"},
		{name: "open fence", page: "<!-- test: x -->\n```sh\nls\n", err: "not closed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "page.md"), []byte(tc.page), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := Parse(dir, "page.md")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d examples %+v, want %d", len(got), got, len(tc.want))
			}
			for i := range got {
				tc.want[i].File = "page.md"
				if got[i] != tc.want[i] {
					t.Errorf("example %d: %#v, want %#v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestAllRefusesDuplicateIDs(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "docs"), 0o755); err != nil {
		t.Fatal(err)
	}
	block := "<!-- test: same -->\n```sh\nls\n```\n"
	for _, p := range []string{"README.md", "docs/a.md"} {
		if err := os.WriteFile(filepath.Join(dir, p), []byte(block), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := All(dir); err == nil || !strings.Contains(err.Error(), `"same" is also used at README.md:2`) {
		t.Errorf("All: %v, want the duplicate named", err)
	}
}

var (
	link    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	heading = regexp.MustCompile(`^#+ (.+)$`)
	notSlug = regexp.MustCompile(`[^a-z0-9 _-]`)
)

// anchors are the GitHub anchors of a Markdown file's headings.
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	fenced := false
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
		}
		if m := heading.FindStringSubmatch(line); m != nil && !fenced {
			out[strings.ReplaceAll(notSlug.ReplaceAllString(strings.ToLower(m[1]), ""), " ", "-")] = true
		}
	}
	return out
}

// TestLinksResolve: every relative link of the README and docs/ names a
// file of the repository, and a heading of it when it has an anchor.
func TestLinksResolve(t *testing.T) {
	root := repoRoot(t)
	pages, err := Pages(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, page := range pages {
		data, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(data), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := filepath.Join(root, page)
			if file != "" {
				path = filepath.Join(filepath.Dir(path), file)
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s: link %s: %v", page, target, err)
				continue
			}
			if anchor != "" && strings.HasSuffix(path, ".md") && !anchors(t, path)[anchor] {
				t.Errorf("%s: link %s: no heading with that anchor", page, target)
			}
		}
	}
}
