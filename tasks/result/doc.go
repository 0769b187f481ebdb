// Package result writes Tekton task results, the one way task step code
// reports values back to its TaskRun.
package result
