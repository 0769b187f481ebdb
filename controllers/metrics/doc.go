// Package metrics exports the controller's Prometheus metrics under
// KubeVirt's and CDI's names: VMIs per node and phase
// (kubevirt_vmi_phase_count), VMIs on an outdated launcher
// (kubevirt_vmi_number_of_outdated), live migrations in flight by phase and those
// that ended (kubevirt_vmi_migrations_in_*_phase,
// kubevirt_vmi_migration_succeeded and _failed), how long migrations took
// to reach each phase
// (kubevirt_vmi_migration_phase_transition_time_from_creation_seconds),
// and each importing
// DataVolume's progress (kubevirt_cdi_import_progress_total), read from the
// manager's cache at scrape time.
package metrics
