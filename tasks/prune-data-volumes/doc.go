// Package prunedatavolumes is the step of the prune-data-volumes task: of
// the DataVolumes a label selector picks in one namespace it keeps the
// newest few and the one a DataSource points at, and deletes the rest, as a
// DataImportCron's importsToKeep does for its imports (the DataImportCron
// controller uses NewestFirst and Outdated from here).
package prunedatavolumes
