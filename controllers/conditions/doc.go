// Package conditions computes CDI condition states the way CDI's
// controllers report them: lastTransitionTime moves only when the status
// changes, lastHeartbeatTime when anything about the condition changes.
package conditions
