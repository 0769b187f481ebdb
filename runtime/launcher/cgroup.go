package launcher

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// cgroupRoot and cgroupControllers are where the launcher puts itself: its
// own cgroup under tekvirt/ in each v1 hierarchy (or the v2 tree).
const cgroupRoot = "/sys/fs/cgroup"

var cgroupControllers = []string{"cpu", "memory", "pids"}

// cgroupDirs are the directories of cgroup name on this host.
func cgroupDirs(name string) []string {
	if _, err := os.Stat(filepath.Join(cgroupRoot, "cgroup.controllers")); err == nil {
		return []string{filepath.Join(cgroupRoot, "tekvirt", name)}
	}
	dirs := make([]string, 0, len(cgroupControllers))
	for _, c := range cgroupControllers {
		dirs = append(dirs, filepath.Join(cgroupRoot, c, "tekvirt", name))
	}
	return dirs
}

// JoinCgroup moves the calling process into its own cgroup.
func JoinCgroup(name string) error {
	pid := []byte(strconv.Itoa(os.Getpid()))
	for _, dir := range cgroupDirs(name) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("creating cgroup %s: %w", dir, err)
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), pid, 0o644); err != nil {
			return fmt.Errorf("joining cgroup %s: %w", dir, err)
		}
	}
	return nil
}

// RemoveCgroup removes the cgroup of a launcher that has exited.
func RemoveCgroup(name string) {
	for _, dir := range cgroupDirs(name) {
		_ = os.Remove(dir)
	}
}
