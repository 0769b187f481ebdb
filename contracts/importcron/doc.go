// Package importcron is what the DataImportCron controller and the
// prune-data-volumes step agree on: when an import was made and which of a
// cron's imports are outdated, so that the controller's garbage collection
// and the step's pruning delete the same ones.
package importcron
