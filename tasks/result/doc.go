// Package result writes Tekton task results, the one way task step code
// reports values back to its TaskRun, and the error result a failed step
// leaves for the controller.
package result
