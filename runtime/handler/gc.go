package handler

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tekvirt/tekvirt/runtime/launcher"
)

// collectEvery is how often VM directories without a VMI are looked for.
const collectEvery = 30 * time.Second

// Collector removes the VMs of VMIs that are gone from the node: deleted
// while the handler was down, with their finalizer removed by hand, or
// migrated to another node (the source's files; the target's of a
// migration that failed).
type Collector struct {
	*Handler
}

// Start runs the collection until ctx ends; the manager calls it once its
// caches have synced.
func (c Collector) Start(ctx context.Context) error {
	for {
		c.collect(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(collectEvery):
		}
	}
}

func (c Collector) collect(ctx context.Context) {
	log := ctrl.LoggerFrom(ctx).WithName("collector")
	entries, err := os.ReadDir(filepath.Join(c.Root, "vms"))
	if err != nil {
		if !os.IsNotExist(err) {
			log.Error(err, "listing VM directories")
		}
		return
	}
	c.collectVMs(ctx, entries)
	// Images of the VMs left (and of VMs being prepared, which have just
	// used theirs) stay cached; others go once idle long enough.
	inUse := map[string]bool{}
	for _, e := range entries {
		for _, im := range c.dirOf(types.UID(e.Name())).images() {
			inUse[im] = true
		}
	}
	idle := c.ContainerDiskIdle
	if idle == 0 {
		idle = DefaultContainerDiskIdle
	}
	removed, err := c.images().Collect(inUse, idle, time.Now())
	if err != nil {
		log.Error(err, "collecting the containerDisk cache")
	}
	for _, name := range removed {
		log.Info("removed an unused containerDisk from the cache", "digest", name)
	}
}

// DefaultContainerDiskIdle is how long an image no VM uses stays cached.
const DefaultContainerDiskIdle = 24 * time.Hour

// collectVMs removes the VM directories (and launchers, domains) of VMIs
// that are gone.
func (c Collector) collectVMs(ctx context.Context, entries []os.DirEntry) {
	log := ctrl.LoggerFrom(ctx).WithName("collector")
	for _, e := range entries {
		spec, err := launcher.ReadSpec(c.dirOf(types.UID(e.Name())).path)
		if err != nil {
			continue // being written, or from a failed preparation the reconciler owns
		}
		d, err := c.dirFor(spec.VMI)
		if err != nil {
			log.Error(err, "finding the launcher Pod of a VM directory", "dir", e.Name())
			continue
		}
		// The VMI of this node, or migrating to it.
		vmi, err := c.get(ctx, client.ObjectKeyFromObject(spec.VMI))
		if err != nil {
			log.Error(err, "looking up the VMI of a VM directory", "dir", d.path)
			continue
		}
		if vmi != nil && vmi.UID == spec.VMI.UID && !staleDir(spec, vmi, c.Node) {
			continue
		}
		log.Info("removing the VM of a VMI gone from this node (deleted, or migrated away)", "vmi", spec.VMI.Namespace+"/"+spec.VMI.Name, "uid", spec.VMI.UID)
		if err := d.stop(ctx, 0); err != nil {
			log.Error(err, "stopping an orphaned launcher", "dir", d.path)
		}
		if err := d.remove(); err != nil {
			log.Error(err, "removing an orphaned VM directory")
		}
	}
}
