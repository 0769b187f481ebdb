package containerdisk

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Collect removes the images no VM uses (inUse holds digest directory
// names) that were last used more than idle ago, and extractions that were
// left half done (a handler killed mid-fetch) for as long. It returns the
// names it removed.
func (c Cache) Collect(inUse map[string]bool, idle time.Duration, now time.Time) ([]string, error) {
	entries, err := os.ReadDir(c.Dir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, e := range entries {
		if !e.IsDir() || inUse[e.Name()] {
			continue
		}
		marker := filepath.Join(c.Dir, e.Name(), completeFile)
		if strings.HasPrefix(e.Name(), fetchPrefix) {
			marker = filepath.Join(c.Dir, e.Name())
		}
		st, err := os.Stat(marker)
		if err != nil || now.Sub(st.ModTime()) < idle {
			continue // no marker: not one of ours, or being renamed into place
		}
		if err := os.RemoveAll(filepath.Join(c.Dir, e.Name())); err != nil {
			return removed, fmt.Errorf("removing cached image %s: %w", e.Name(), err)
		}
		removed = append(removed, e.Name())
	}
	return removed, nil
}
