// Package tasks holds tekvirt's Tekton tasks, one folder each: task.yaml (the
// hand-written source of truth), rbac.yaml (the ClusterRole its
// ServiceAccount gets), README.md, samples/ and the step's Go package. This
// package only embeds the manifests for the catalog.
package tasks
