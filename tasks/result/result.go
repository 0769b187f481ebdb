package result

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/tekvirt/tekvirt/contracts/datastep"
)

// DirEnv overrides the results directory (tests); Tekton's is DefaultDir.
const DirEnv = "TEKVIRT_RESULTS_DIR"

// DefaultDir is where Tekton collects step results.
const DefaultDir = "/tekton/results"

// Dir returns the results directory in effect.
func Dir() string {
	if d := os.Getenv(DirEnv); d != "" {
		return d
	}
	return DefaultDir
}

// Error is the result a failed step leaves its error in, for tasks that
// declare it: the controller reads why a run failed from the TaskRun's
// status instead of its pod's log.
const Error = datastep.ErrorResult

// WriteError leaves err as the Error result, where there is a results
// directory (in a Tekton step); Tekton ignores it for tasks that do not
// declare the result.
func WriteError(err error) {
	if _, statErr := os.Stat(Dir()); statErr != nil {
		return
	}
	_ = os.WriteFile(filepath.Join(Dir(), Error), []byte(err.Error()), 0o644)
}

// Write stores every result under Dir, in name order, and fails on the
// first one it cannot write.
func Write(results map[string]string) error {
	names := make([]string, 0, len(results))
	for n := range results {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(Dir(), n), []byte(results[n]), 0o644); err != nil {
			return fmt.Errorf("writing result %s: %w", n, err)
		}
	}
	return nil
}
