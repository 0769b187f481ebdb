package docexample

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// Example is one fenced block of the docs.
type Example struct {
	// ID is the marker's test id; empty for an untested block.
	ID string
	// Untested is the marker's reason when no test runs the block.
	Untested string
	// File is the page, relative to the repository's root; Line the fence's line.
	File string
	Line int
	// Lang is the fence's language (sh, yaml, ...).
	Lang string
	// Body is the block's text, ending in a newline.
	Body string
}

func (e Example) String() string { return fmt.Sprintf("%s:%d", e.File, e.Line) }

// checked are the fence languages whose blocks need a marker.
var checked = map[string]bool{"sh": true, "bash": true, "shell": true, "console": true, "yaml": true, "yml": true}

var (
	testMarker     = regexp.MustCompile(`^<!-- test: ([a-z0-9][a-z0-9-]*) -->$`)
	untestedMarker = regexp.MustCompile(`^<!-- not tested: (.+) -->$`)
)

// Pages are the files whose examples are checked: the README and every
// Markdown page under docs/, relative to root.
func Pages(root string) ([]string, error) {
	pages := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".md") {
			return err
		}
		rel, err := filepath.Rel(root, p)
		pages = append(pages, rel)
		return err
	})
	sort.Strings(pages[1:])
	return pages, err
}

// Parse reads the fenced blocks of one page. A checked block without a
// marker is an error naming its line, as is a marker not followed by a
// fence.
func Parse(root, page string) ([]Example, error) {
	f, err := os.Open(filepath.Join(root, page))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var (
		out     []Example
		marker  string
		markerN int
		cur     *Example
		indent  string
		body    strings.Builder
		n       int
	)
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		n++
		line := s.Text()
		trimmed := strings.TrimSpace(line)
		if cur != nil {
			if trimmed == "```" {
				cur.Body = body.String()
				out = append(out, *cur)
				cur = nil
				continue
			}
			body.WriteString(strings.TrimPrefix(line, indent) + "\n")
			continue
		}
		if strings.HasPrefix(trimmed, "```") {
			lang := strings.TrimPrefix(trimmed, "```")
			e := &Example{File: page, Line: n, Lang: lang}
			if err := e.mark(marker, markerN); err != nil {
				return nil, err
			}
			marker = ""
			cur = e
			indent = line[:len(line)-len(strings.TrimLeft(line, " \t"))]
			body.Reset()
			continue
		}
		if marker != "" && trimmed != "" {
			return nil, fmt.Errorf("%s:%d: marker %q is not followed by a fenced block", page, markerN, marker)
		}
		if strings.HasPrefix(trimmed, "<!-- test:") || strings.HasPrefix(trimmed, "<!-- not tested:") {
			marker, markerN = trimmed, n
		}
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	if cur != nil {
		return nil, fmt.Errorf("%s:%d: the fence is not closed", page, cur.Line)
	}
	if marker != "" {
		return nil, fmt.Errorf("%s:%d: marker %q is not followed by a fenced block", page, markerN, marker)
	}
	return out, nil
}

// mark sets the example's test id or reason from the marker on line n
// before its fence, which a shell or YAML example must have.
func (e *Example) mark(marker string, n int) error {
	switch {
	case marker == "" && checked[e.Lang]:
		return fmt.Errorf("%s:%d: a %s example without a marker: say which test runs it (<!-- test: ID -->) or why none can (<!-- not tested: WHY -->)", e.File, e.Line, e.Lang)
	case marker == "":
		return nil
	}
	if m := testMarker.FindStringSubmatch(marker); m != nil {
		e.ID = m[1]
	} else if m := untestedMarker.FindStringSubmatch(marker); m != nil {
		e.Untested = m[1]
	} else {
		return fmt.Errorf("%s:%d: marker %q is neither `<!-- test: ID -->` nor `<!-- not tested: WHY -->`", e.File, n, marker)
	}
	return nil
}

// All parses every page under root; test ids must be unique.
func All(root string) ([]Example, error) {
	pages, err := Pages(root)
	if err != nil {
		return nil, err
	}
	var all []Example
	seen := map[string]Example{}
	for _, p := range pages {
		ex, err := Parse(root, p)
		if err != nil {
			return nil, err
		}
		for _, e := range ex {
			if e.ID == "" {
				continue
			}
			if prev, ok := seen[e.ID]; ok {
				return nil, fmt.Errorf("%s: test id %q is also used at %s", e, e.ID, prev)
			}
			seen[e.ID] = e
		}
		all = append(all, ex...)
	}
	return all, nil
}

// Root is the repository's root: the nearest directory above the working
// directory holding go.mod.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Find is the example marked `<!-- test: id -->`, or fails the test. Call
// it with the id as a string literal: TestEveryExampleIsRunOrSaysWhy finds
// the callers that way.
func Find(t testing.TB, id string) Example {
	t.Helper()
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	all, err := All(root)
	if err != nil {
		t.Fatalf("the docs' examples: %v", err)
	}
	for _, e := range all {
		if e.ID == id {
			return e
		}
	}
	t.Fatalf("no example of the docs is marked <!-- test: %s -->", id)
	return Example{}
}

// With is the example with old replaced by new, for a value the docs leave
// to the reader (a registry, a URL); it fails the test when old is not in
// the block, so a changed example cannot go untested unnoticed.
func (e Example) With(t testing.TB, old, new string) Example {
	t.Helper()
	if !strings.Contains(e.Body, old) {
		t.Fatalf("%s (%s) no longer holds %q", e, e.ID, old)
	}
	e.Body = strings.ReplaceAll(e.Body, old, new)
	return e
}
