package tasks

import "embed"

// FS holds every task's task.yaml and rbac.yaml, for the catalog.
//
//go:embed */task.yaml */rbac.yaml
var FS embed.FS
