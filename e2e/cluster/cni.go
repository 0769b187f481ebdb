package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// The nodes' CNI directories, where containerd looks for plugins and
// network configurations: the standard paths, which the network add-ons'
// DaemonSets (Multus, the bridge plugin) install into as on any cluster.
// The first node's are this machine's; an extra node has its own copies
// (nodeBinds).
const (
	CNIConfDir = "/etc/cni/net.d"
	CNIBinDir  = "/opt/cni/bin"
)

// cniConfigFile is the testbed's own pod network configuration.
const cniConfigFile = "10-tekvirt.conflist"

// addonCNIFiles are what the network add-ons write into the nodes' CNI
// directories; `tekvirt down` removes them with the testbed's own.
var addonCNIFiles = map[string][]string{
	CNIConfDir: {"00-multus.conf", "00-multus.conflist", "multus.d"},
	CNIBinDir:  {"multus", "bridge", ".bridge.new"},
}

// nodePath is path as node n sees it, on this machine.
func nodePath(n node, path string) string {
	if n.first() {
		return path
	}
	return pathIn(nodeDir(n.name), path)
}

// seedCNIBin links the Debian CNI plugins (cniBinDir) into n's CNIBinDir.
func seedCNIBin(n node) error { return linkPlugins(cniBinDir, nodePath(n, CNIBinDir)) }

// linkPlugins links each plugin of from into dir, where the network
// add-ons put theirs beside them; a plugin an add-on installed there is
// kept.
func linkPlugins(from, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	plugins, err := os.ReadDir(from)
	if err != nil {
		return fmt.Errorf("the CNI plugins: %w", err)
	}
	for _, p := range plugins {
		link := filepath.Join(dir, p.Name())
		if _, err := os.Lstat(link); err == nil {
			continue
		}
		if err := os.Symlink(filepath.Join(from, p.Name()), link); err != nil {
			return err
		}
	}
	return nil
}

// checkCNIConfDir refuses a first node (this machine) whose CNIConfDir
// holds a network configuration neither the testbed nor an add-on wrote:
// containerd would load the first one by name, perhaps not the testbed's.
func checkCNIConfDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var foreign []string
	for _, e := range entries {
		name := e.Name()
		if name == cniConfigFile || slices.Contains(addonCNIFiles[CNIConfDir], name) {
			continue
		}
		if ext := filepath.Ext(name); ext == ".conf" || ext == ".conflist" || ext == ".json" {
			foreign = append(foreign, filepath.Join(dir, name))
		}
	}
	if len(foreign) > 0 {
		return fmt.Errorf("%s holds network configurations of something else (%s): the testbed's first node is this machine, whose containerd would load them; move them away", dir, strings.Join(foreign, ", "))
	}
	return nil
}

// wipeCNI removes from this machine's CNI directories what the testbed and
// the network add-ons put there (an extra node's copies go with its
// directory).
func wipeCNI() error { return wipeCNIDirs(CNIConfDir, CNIBinDir, cniBinDir) }

// wipeCNIDirs removes from confDir and binDir what the testbed (links into
// plugins) and the network add-ons put there, and nothing else.
func wipeCNIDirs(confDir, binDir, plugins string) error {
	var errs []error
	remove := func(path string) {
		if err := os.RemoveAll(path); err != nil {
			errs = append(errs, err)
		}
	}
	remove(filepath.Join(confDir, cniConfigFile))
	for dir, names := range map[string][]string{confDir: addonCNIFiles[CNIConfDir], binDir: addonCNIFiles[CNIBinDir]} {
		for _, name := range names {
			remove(filepath.Join(dir, name))
		}
	}
	entries, _ := os.ReadDir(binDir)
	for _, e := range entries {
		link := filepath.Join(binDir, e.Name())
		if target, err := os.Readlink(link); err == nil && filepath.Dir(target) == plugins {
			remove(link)
		}
	}
	return errors.Join(errs...)
}
