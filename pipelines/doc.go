// Package pipelines holds tekvirt's Tekton pipelines, one folder each with
// pipeline.yaml and README.md, every taskRef naming a task of tasks/. The
// catalog installs them next to the tasks, with a ServiceAccount per
// pipeline bound to the roles of the tasks it runs.
package pipelines
