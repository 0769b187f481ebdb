package clonedisk

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/tekvirt/tekvirt/images"
	"github.com/tekvirt/tekvirt/tasks/result"
)

// DiskFile is the disk's name on a volume, as in CDI.
const DiskFile = "disk.img"

// Params are the task's params.
type Params struct {
	SourceDir, TargetDir string
	// Size grows the clone to a virtual size (e.g. a larger target PVC).
	Size string
}

// Run clones and returns the method used.
func Run(p Params, out io.Writer) (string, error) {
	var size int64
	if p.Size != "" {
		q, err := resource.ParseQuantity(p.Size)
		if err != nil {
			return "", fmt.Errorf("param size %q is not a quantity like 10Gi: %w", p.Size, err)
		}
		size = q.Value()
	}
	src, dst := filepath.Join(p.SourceDir, DiskFile), filepath.Join(p.TargetDir, DiskFile)
	st, err := os.Stat(src)
	if err != nil {
		return "", &result.Failure{Err: fmt.Errorf("%w: source volume has no %s: %w", images.ErrNotFound, DiskFile, err)}
	}
	if size > 0 && size < st.Size() {
		return "", &result.Failure{Err: fmt.Errorf("%w: the source disk is %d bytes, the size asked %d", images.ErrTooLarge, st.Size(), size)}
	}
	start := time.Now()
	method, err := images.Clone(src, dst)
	if err != nil {
		return "", err
	}
	if size > st.Size() {
		if err := os.Truncate(dst, size); err != nil {
			return "", err
		}
	}
	fmt.Fprintf(out, "cloned %d bytes by %s in %s\n", st.Size(), method, time.Since(start).Round(time.Millisecond))
	return method, nil
}
