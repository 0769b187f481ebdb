package tasks

import "embed"

// FS holds every task's task.yaml, rbac.yaml, README.md and samples/, for
// the catalog.
//
//go:embed */task.yaml */rbac.yaml */README.md */samples
var FS embed.FS
